"""``opinfo``: PyTorch's OpInfo database (``common_methods_invocations.op_db``) as operator instances.

Per OpInfo: ``sample_inputs`` and ``reference_inputs`` in float32 (an operator without float32, such as the bitwise
ones and shifts, in its first integer or bool dtype), plus a sample in every other dtype the entry declares (a few
int64 and bool ones), generated under ``torch.manual_seed(stable_seed(op))``. Every kept sample was run twice
through its rebuilt recipe (:func:`dlci.models.rebuild.torch_call`) to prove it rebuilds, is deterministic,
returns tensors and leaves its inputs untouched.
"""
from __future__ import annotations

import contextlib
import random
import re
from typing import Iterator

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec, Unencodable
from dlci.sources import Source, register, stable_seed
from dlci.models import seed_torch
from dlci.instance.recipe import params_of, try_resolve
from dlci.operators.facts import RANDOM_ONLY_BY, VALUES_UNDEFINED
from dlci.models.rebuild import check_torch_instance
from dlci.sources._common import Slots, dist_version, encode

# Sampling ops, whose outputs are draws rather than functions of the inputs (name tokens of OpInfo names).
_RANDOM_NAME = re.compile(r"(^|[._])(bernoulli|normal|rand\w*|dropout\w*|\w*_dropout|multinomial|uniform|"
                          r"exponential|geometric|cauchy|log_normal|poisson|rrelu|random\w*|"
                          r"fractional_max_pool\w*)($|[._])")
# every dtype an OpInfo entry declares gets a sample or two: converters keep dtype tables, casts and integer paths of
# their own (bitwise ops and shifts exist in integer dtypes only); int64 and bool first, as before
_EXTRA_DTYPES = ("int64", "bool", "int32", "uint8", "int8", "int16", "float64", "float16", "bfloat16", "complex64")
# an operator without float32 (integer-only: bitwise, shifts, gcd...) takes the first of these as its main dtype
_MAIN_DTYPES = ("float32", "int64", "int32", "bool", "uint8", "int16", "int8", "float64", "complex64")


# OpInfos whose function is a lambda that only swaps the first two arguments of a public function
# (``lambda tensors, equation: torch.einsum(equation, tensors)``): the sample is OpInfo's input then its args, the
# call is that function with the two swapped; OpInfo's own tests run them through the same lambda
SWAPPED_FIRST_TWO = {
    ("einsum", ""): "torch.einsum",
    ("nn.functional.embedding", ""): "torch.nn.functional.embedding",
    ("nn.functional.embedding_bag", ""): "torch.nn.functional.embedding_bag",
    ("special.polygamma", "special_polygamma_n_0"): "torch.special.polygamma",
}


def op_id(op) -> str:
    """``aten::<name>``: OpInfo's aten_name with python namespaces turned into aten's spelling."""
    name = op.aten_name or op.name
    if name.startswith("nn.functional."):
        name = name[len("nn.functional."):]
    return "aten::" + name.replace(".", "_")


def fn_path(op) -> str | None:
    """A public dotted path that imports to exactly ``op.op``, or None."""
    import torch
    f = op.op
    swapped = SWAPPED_FIRST_TWO.get((op.name, op.variant_test_name or ""))
    if swapped is not None:
        return swapped if try_resolve(swapped) is not None else None
    cands = [f"torch.{op.name}"]
    name, mod, qual = (getattr(f, a, None) for a in ("__name__", "__module__", "__qualname__"))
    if isinstance(mod, str) and isinstance(qual, str) and "<" not in qual:
        cands.append(f"{mod}.{qual}")
    if isinstance(name, str) and "<" not in name:
        for prefix, ns in (("fft_", "torch.fft"), ("linalg_", "torch.linalg"), ("special_", "torch.special")):
            if name.startswith(prefix):
                cands.append(f"{ns}.{name[len(prefix):]}")
        cands += [f"{ns}.{name}" for ns in ("torch", "torch.nn.functional", "torch.special", "torch.linalg",
                                            "torch.fft", "torch.Tensor")]
    cands.append(f"torch.Tensor.{op.name}")
    if isinstance(f, torch._ops.OpOverloadPacket):
        cands.append("torch.ops." + f._qualified_op_name.replace("::", "."))
    elif isinstance(f, torch._ops.OpOverload):
        cands.append("torch.ops." + str(f))
    for c in cands:
        # test-internal helpers would need torch's test tree in every worker: not a public operator
        if "testing._internal" not in c and try_resolve(c) is f:
            return c
    # an OpInfo whose function is a lambda around the method (unfold, expand, view, repeat, where...): its method
    # variant takes the sample as OpInfo calls it, ``sample.input.method(*args, **kwargs)``, and OpInfo's own
    # variant-consistency test holds it to the same results
    method = getattr(op, "method_variant", None)
    mname = getattr(method, "__name__", None)
    if isinstance(mname, str) and "<" not in mname and try_resolve(f"torch.Tensor.{mname}") is method:
        return f"torch.Tensor.{mname}"
    if op.name in VALUES_UNDEFINED or op.name in RANDOM_ONLY_BY:
        # their OpInfos wrap the call in a lambda that only forwards it (x.new_empty(...), torch.empty_strided(...),
        # wrapper_set_seed(...))
        return next((c for c in (f"torch.{op.name}", f"torch.Tensor.{op.name}") if try_resolve(c) is not None), None)
    return None


def is_random(op) -> bool:
    import torch
    if _RANDOM_NAME.search(op.name) or _RANDOM_NAME.search(op.variant_test_name or ""):
        return True
    packet = getattr(torch.ops.aten, op_id(op).split("::", 1)[1], None)
    try:
        overloads = [getattr(packet, o) for o in packet.overloads()] if packet is not None else []
    except Exception:  # noqa: BLE001 - odd packets: decide by name only
        overloads = []
    return any(torch.Tag.nondeterministic_seeded in o.tags for o in overloads)


@contextlib.contextmanager
def _untracked_samples():
    """OpInfo's sample iterators serve torch's own unittest classes: each one looks for the running TestCase by
    walking the interpreter's stack (inspect.stack, which looks every frame's module up among all imported modules:
    seconds a call in a deep stack with TVM and TensorFlow imported, as under pytest), and seeds torch before each
    sample with torch.manual_seed, which on a machine without CUDA queues a seeding for each absent device kind
    with its caller's formatted stack. Here there is no TestCase on the stack (the walk finds none, the answer
    given at once) and the CPU generator alone is what that seeding sets: the same samples, without the walks."""
    import torch
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core
    saved = [(m, "extract_test_fn", m.extract_test_fn) for m in (common_utils, core) if hasattr(m, "extract_test_fn")]
    if not torch.cuda.is_available():
        saved.append((torch, "manual_seed", torch.manual_seed))
    for module, name, _ in saved:
        setattr(module, name, _no_test_fn if name == "extract_test_fn" else seed_torch)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _no_test_fn():
    return None


@register
class OpInfoSource(Source):
    name = "opinfo"
    framework = "torch"
    description = "PyTorch OpInfo sample_inputs / reference_inputs (torch.testing._internal op_db)"
    default_limit_per_op = 24
    max_elements = 100_000  # per instance, all inputs together

    def library_versions(self) -> dict[str, str]:
        return {"torch": dist_version("torch")}

    def skip_reason(self, op) -> str | None:
        import torch
        if op.name.endswith("_") and not op.name.endswith("__") or "inplace" in op.variant_test_name \
                or "in_place" in op.variant_test_name:
            return "op:inplace"
        if op.is_factory_function and op.name not in VALUES_UNDEFINED:
            return "op:factory"  # (empty & co.: their converters are worth testing for shape, dtype and crashes)
        if is_random(op) and op.name not in RANDOM_ONLY_BY:
            return "op:random"
        if not any(op.supports_dtype(getattr(torch, d), "cpu") for d in _MAIN_DTYPES):
            return "op:no-dtype"
        return None

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        import warnings
        from dlci.torch_testing import op_db
        cap = limit_per_op if limit_per_op is not None else self.default_limit_per_op
        self.stats.setdefault("ops_seen", 0)
        for op in op_db():
            # collect per op so that the warnings filter never leaks to the consumer between yields
            with warnings.catch_warnings(), _untracked_samples():
                warnings.simplefilter("ignore")  # deprecation chatter of sample generators, not findings
                batch = list(self._op(op, cap))
            yield from batch

    def _op(self, op, cap: int) -> Iterator[Instance]:
        variant = op.variant_test_name or ""
        oid = op_id(op)
        if not self.wanted(oid, op.name, f"{op.name}.{variant}" if variant else ""):
            return
        self.stats["ops_seen"] += 1
        reason = self.skip_reason(op)
        path = None if reason else fn_path(op)
        if reason is None and path is None:
            reason = "op:unresolvable-fn"
        if reason:
            self.skip(reason)
            return
        yield from self._op_instances(op, oid, path, cap)

    def _op_instances(self, op, oid: str, path: str, cap: int) -> Iterator[Instance]:
        import torch
        variant = op.variant_test_name or ""
        seed = stable_seed("opinfo", op.name, variant)
        supported = {str(d).replace("torch.", "") for d in op.supported_dtypes("cpu")}
        main = getattr(torch, next(d for d in _MAIN_DTYPES if d in supported))
        firsts = {"int64": min(3, cap // 8), "bool": min(3, cap // 8)}
        extra = {d: firsts.get(d, 1 if cap >= 16 else 0) for d in _EXTRA_DTYPES if d in supported
                 and d != str(main).replace("torch.", "")}
        n_float = cap - sum(extra.values())
        n_ref = n_float // 3 if op.reference_inputs_func is not None else 0
        seen: set[str] = set()
        kept = 0
        # samples with an empty input are a boundary worth one or two tests, not the whole quota: unfold's first
        # dozen samples all have batch 0, and a converter that fails on every empty batch was never run otherwise
        empty_quota = max(1, cap // 8)
        empty = 0

        def start(factory, dtype, kind):
            # seed every generator: a sample depends only on (op, dtype, kind) and the order taken below
            seed_torch(seed); random.seed(seed); np.random.seed(seed)
            label = kind if dtype is torch.float32 else f"{kind}-{str(dtype).replace('torch.', '')}"
            return [enumerate(factory("cpu", dtype, requires_grad=False)), label]

        def take(gen, quota) -> Iterator[Instance]:
            nonlocal kept, empty
            got = 0
            while got < quota and kept < cap and gen[0] is not None:
                try:
                    k, sample = next(gen[0])
                except StopIteration:
                    gen[0] = None
                    return
                except Exception as e:  # noqa: BLE001 - a broken generator loses that op's remaining samples only
                    self.skip(f"generator-error:{type(e).__name__}")
                    gen[0] = None
                    return
                inst = self._instance(op, oid, path, sample, gen[1], k, seed, seen)
                if inst is not None and any(0 in spec.shape for spec in inst.inputs):
                    if empty >= empty_quota:
                        self.skip("empty-surplus")
                        continue
                    empty += 1
                if inst is not None:
                    got += 1
                    kept += 1
                    yield inst

        samples = start(op.sample_inputs, main, "sample")
        yield from take(samples, n_float - n_ref)
        if n_ref:
            yield from take(start(op.reference_inputs, main, "reference"), n_ref)
        # few reference inputs: go on with the same sample generator (regenerating would only yield duplicates)
        yield from take(samples, n_float - kept)
        for dname, n in extra.items():
            if n:
                yield from take(start(op.sample_inputs, getattr(torch, dname), "sample"), n)

    def _instance(self, op, oid, path, sample, kind, k, seed, seen: set) -> Instance | None:
        import torch
        if sample.kwargs.get(RANDOM_ONLY_BY.get(op.name, ""), 0):
            self.skip("random-argument")
            return None
        variant = op.variant_test_name or ""
        slots = Slots()
        try:
            if not any(isinstance(t, torch.Tensor) for t in _flat(sample.input)) and op.name not in VALUES_UNDEFINED:
                raise Unencodable("no-tensor-input")
            if (op.name, variant) in SWAPPED_FIRST_TWO:
                if not sample.args:
                    raise Unencodable("no-second-argument")
                args = [encode(sample.args[0], slots), encode(sample.input, slots)] + \
                    [encode(a, slots) for a in sample.args[1:]]
            else:
                args = [encode(sample.input, slots)] + [encode(a, slots) for a in sample.args]
            kwargs = {name: encode(v, slots) for name, v in sample.kwargs.items()}
            if sum(a.size for a in slots.arrays) > self.max_elements:
                # reference inputs include exhaustive value grids of millions of elements: too big to ship around
                raise Unencodable("too-large")
        except Unencodable as e:
            self.skip(e.reason)
            return None
        variant = op.variant_test_name or ""
        inst = Instance(
            op=oid, framework="torch",
            call={"kind": "torch_fn", "fn": path, "args": args, "kwargs": kwargs},
            inputs=[TensorSpec.of(a) for a in slots.arrays],
            params=params_of(args, kwargs),
            origin=Origin("opinfo", f"op_db:{op.name}[{variant}]#{k} {kind}", f"torch {torch.__version__}"),
            seed=seed,
            arrays={f"in:{i}": a for i, a in enumerate(slots.arrays)},
        )
        if inst.id in seen:  # before the (costly) check run
            self.skip("duplicate")
            return None
        seen.add(inst.id)
        reason = check_torch_instance(inst)
        if reason:
            self.skip(reason)
            return None
        return inst


def _flat(x):
    if isinstance(x, (list, tuple)):
        for v in x:
            yield from _flat(v)
    else:
        yield x
