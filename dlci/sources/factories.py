"""``factories``: ATen operators that take no tensor (window functions, arange, eye, full...) called from their schema.

OpInfo covers few of them at the ATen level (``torch.signal.windows.hann`` is Python, not ``aten::hann_window``)
and its factory entries are skipped by the ``opinfo`` source; converters still implement them (torchlib's
``aten_hann_window``, TVM's ``arange`` and ``full``). Per overload whose arguments are all ints, floats, bools,
scalars and the optional dtype/layout/device/pin_memory keywords, a few small values per argument are combined,
in float32 and float64 (integer dtypes for the integer-valued ones), every call run twice by
:func:`dlci.models.rebuild.check_torch_instance` (deterministic, returns tensors). Random operators are left out.
"""
from __future__ import annotations

import itertools
import re
from typing import Iterator

from dlci.instance import Instance, Origin
from dlci.instance.recipe import params_of, try_resolve
from dlci.models.rebuild import check_torch_instance
from dlci.sources import Source, register, stable_seed
from dlci.sources._common import Slots, dist_version, encode

# a few values per argument type: small, a boundary (1), and a typical size
_VALUES = {"int": (1, 2, 5, 12), "SymInt": (1, 2, 5, 12), "float": (0.5, 2.5), "bool": (True, False),
           "Scalar": (3, 2.5), "number": (3, 2.5), "List[int]": ([3], [2, 3], [1, 4, 2]),
           "List[SymInt]": ([3], [2, 3], [1, 4, 2])}
_OPTIONAL_KWARGS = {"layout", "device", "pin_memory", "memory_format"}
_RANDOM = re.compile(r"rand|normal|bernoulli|poisson|multinomial|dropout|uniform|empty")
_DTYPES = ("float32", "float64", "int64")


def _overloads(op: str):
    import torch
    for schema in torch._C._jit_get_schemas_for_operator(op):
        if schema.overload_name.endswith("out") or schema.overload_name == "names":
            continue
        if [str(r.type) for r in schema.returns] != ["Tensor"]:
            continue
        yield schema


def _argument_values(schema) -> list[tuple[str, bool, tuple]] | None:
    """(name, keyword-only, values to try) per argument, or None when an argument is not a plain value."""
    out = []
    for a in schema.arguments:
        t = str(a.type)
        if a.name in _OPTIONAL_KWARGS:
            continue  # left at their defaults: CPU, strided
        if a.name == "dtype":
            out.append((a.name, True, _DTYPES))
        elif t in _VALUES:
            out.append((a.name, a.kwarg_only, _VALUES[t]))
        elif t.startswith("Optional[") and t[9:-1] in _VALUES:
            out.append((a.name, a.kwarg_only, _VALUES[t[9:-1]]))
        else:
            return None
    return out


@register
class FactorySource(Source):
    name = "factories"
    framework = "torch"
    description = "ATen operators without tensor inputs (window functions, arange, eye, full...), from their schemas"
    default_limit_per_op = 12
    per_op = True  # asked for the wanted operators only

    def library_versions(self) -> dict[str, str]:
        return {"torch": dist_version("torch")}

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        cap = limit_per_op if limit_per_op is not None else self.default_limit_per_op
        for op in self.ops or ():  # the operators asked for only: there is no finite list worth enumerating
            namespace, _, name = op.rpartition("::")
            if namespace not in ("", "aten") or _RANDOM.search(name):
                continue
            yield from self._op(f"aten::{name}", cap)

    def _op(self, op: str, cap: int) -> Iterator[Instance]:
        import torch
        name = op.split("::", 1)[1]
        fn = f"torch.{name}"
        if try_resolve(fn) is None:
            self.skip("no-torch-function")
            return
        seen: set[str] = set()
        # per overload its combinations, spread (every value of the first argument before repeats of the rest);
        # the overloads taken in turn, so that hann_window.periodic is tried as well as hann_window
        plans = []
        for schema in _overloads(op):
            spec = _argument_values(schema)
            if spec is not None:
                combos = list(itertools.product(*(values for _n, _k, values in spec)))
                step = max(1, len(combos) // max(1, cap))
                plans.append([(schema, spec, values) for values in combos[::step]])
        kept = 0
        for schema, spec, values in (c for row in itertools.zip_longest(*plans) for c in row if c is not None):
            if kept >= cap:
                return
            args = [v for (n, kw, _), v in zip(spec, values) if not kw]
            kwargs = {n: (getattr(torch, v) if n == "dtype" else v) for (n, kw, _), v in zip(spec, values) if kw}
            slots = Slots()
            call = {"kind": "torch_fn", "fn": fn, "args": [encode(a, slots) for a in args],
                    "kwargs": {k: encode(v, slots) for k, v in kwargs.items()}}
            inst = Instance(op=op, framework="torch", call=call, inputs=[],
                            params=params_of(call["args"], call["kwargs"]),
                            origin=Origin("factories", f"schema:{schema.name}.{schema.overload_name or 'default'}"
                                          f"#{kept}", f"torch {torch.__version__}"),
                            seed=stable_seed("factories", op))
            if inst.id in seen:
                continue
            seen.add(inst.id)
            reason = check_torch_instance(inst)
            if reason:
                self.skip(reason)
                continue
            kept += 1
            yield inst
