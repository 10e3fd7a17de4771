"""``module_db``: PyTorch's ModuleInfo database (``common_modules.module_db``) as ``nn::<Class>`` instances.

Each ModuleInput becomes a ``torch_module`` recipe; the module is built under ``torch.manual_seed(seed)`` and
its ``state_dict()`` stored as ``state:<name>`` arrays, so a worker rebuilds exactly the same weights.
"""
from __future__ import annotations

import random
import re
import warnings
from typing import Iterator

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec, Unencodable, to_numpy
from dlci.sources import Source, register, stable_seed
from dlci.models import seed_torch
from dlci.instance.recipe import params_of
from dlci.sources._common import Slots, dist_version, encode
from dlci.models.rebuild import check_torch_instance

# Modules whose eval-mode output is still a random draw.
_RANDOM_MODULE = re.compile(r"Dropout|FractionalMaxPool|RReLU")


def module_path(cls) -> str:
    import torch
    if getattr(torch.nn, cls.__name__, None) is cls:
        return f"torch.nn.{cls.__name__}"
    return f"{cls.__module__}.{cls.__qualname__}"


@register
class ModuleDbSource(Source):
    name = "module_db"
    framework = "torch"
    description = "PyTorch ModuleInfo module_inputs (torch.testing._internal.common_modules module_db)"
    default_limit_per_op = 24

    def library_versions(self) -> dict[str, str]:
        return {"torch": dist_version("torch")}

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        from dlci.torch_testing import module_db
        cap = limit_per_op if limit_per_op is not None else self.default_limit_per_op
        self.stats.setdefault("ops_seen", 0)
        for info in module_db():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                batch = list(self._module(info, cap))
            yield from batch

    def _module(self, info, cap: int) -> Iterator[Instance]:
        import torch
        cls = info.module_cls
        oid = f"nn::{cls.__name__}"
        if not self.wanted(oid, cls.__name__, info.name):
            return
        self.stats["ops_seen"] += 1
        if _RANDOM_MODULE.search(cls.__name__):
            return self.skip("module:random")
        if info.is_lazy:  # same computation as the eager class, which is harvested on its own
            return self.skip("module:lazy")
        if torch.float32 not in info.supported_dtypes("cpu"):
            return self.skip("module:no-float32")
        seed = stable_seed("module_db", info.name)
        seed_torch(seed); random.seed(seed); np.random.seed(seed)
        try:
            module_inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=False,
                                                    training=False)
        except Exception as e:  # noqa: BLE001
            return self.skip(f"generator-error:{type(e).__name__}")
        kept = 0
        # spread the cap over the whole list (inputs are listed grouped by configuration), then fill up
        n = len(module_inputs)
        stride = max(1, -(-n // cap)) if cap else 1
        order = list(range(0, n, stride)) + [i for i in range(n) if i % stride]
        for pos, k in enumerate(order):
            if kept >= cap:
                self.skip("over-cap", n - pos)
                break
            inst = self._instance(info, oid, module_inputs[k], k, seed)
            if inst is not None:
                kept += 1
                yield inst

    def _instance(self, info, oid: str, mi, k: int, seed: int) -> Instance | None:
        import torch
        cls = info.module_cls
        ctor, fwd = mi.constructor_input, mi.forward_input
        try:
            ctor_slots = Slots()
            cargs = [encode(a, ctor_slots) for a in ctor.args]
            ckwargs = {n: encode(v, ctor_slots) for n, v in ctor.kwargs.items()}
            if ctor_slots.arrays:
                raise Unencodable("tensor-in-constructor")
            slots = Slots()
            fargs = [encode(a, slots) for a in fwd.args]
            fkwargs = {n: encode(v, slots) for n, v in fwd.kwargs.items()}
            if not slots.arrays:
                raise Unencodable("no-tensor-input")
            seed_torch(seed)
            module = cls(*ctor.args, **ctor.kwargs).eval()
            state = {f"state:{n}": to_numpy(v) for n, v in module.state_dict().items()}
        except Unencodable as e:
            self.skip(e.reason)
            return None
        except Exception as e:  # noqa: BLE001 - constructor rejects its own test input
            self.skip(f"construct-error:{type(e).__name__}")
            return None
        params = params_of(cargs, ckwargs)
        params.update({f"forward.{n}": v for n, v in params_of(fargs, fkwargs).items()})
        desc = f" {mi.desc}" if getattr(mi, "desc", "") else ""
        inst = Instance(
            op=oid, framework="torch",
            call={"kind": "torch_module", "cls": module_path(cls), "args": cargs, "kwargs": ckwargs,
                  "forward_args": fargs, "forward_kwargs": fkwargs},
            inputs=[TensorSpec.of(a) for a in slots.arrays],
            params=params,
            origin=Origin("module_db", f"module_db:{info.name}#{k}{desc}", f"torch {torch.__version__}"),
            seed=seed,
            arrays={**{f"in:{i}": a for i, a in enumerate(slots.arrays)}, **state},
        )
        reason = check_torch_instance(inst)
        if reason:
            self.skip(reason)
            return None
        return inst
