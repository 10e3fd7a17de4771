"""``tf_ops``: single TensorFlow raw-op calls, derived from the installed TensorFlow's registered OpDefs.

Operators: every name in ``dir(tf.raw_ops)`` whose OpDef (``op_def_registry.get(name)``) is a pure numeric
computation: not stateful, no resource/variant/string (or reference) inputs or outputs, no function attributes,
not deprecated at the installed graph version, at least one tensor input of a numeric type, and not one of the
excluded families (random sampling, gradients, sparse triplets, quantized types, device/TPU/XLA, training kernels,
debug, control flow, I/O — ``roles.EXCLUDED``, name patterns). Each skipped operator is counted under
``op:<reason>``.

Arguments are filled by ROLE (``roles.INPUT_ROLES``, ``roles.ATTR_ROLES``: tables keyed by argument/attribute names,
applied across all operators): data tensors get small shapes (rank 0-4, NHWC ``[1,5,5,3]``-like for image
operators, broadcasting / matmul / scalar partners for a second operand) in float32 and the other dtypes the type
attribute allows, values from a few domains (normal, positive, unit, small integers, and the boundary classes
zeros, signed zero, large, huge, tiny, subnormal, NaN, Inf); index and shape arguments that are tensors in the
OpDef (axis, perm, shape, paddings, begin/end/strides, size, multiples, k, indices, segment_ids, block_shape ...)
are plain Python ints/lists in the call (graph constants, the way models present them to converters), and in a
minority of instances one of them is a runtime int32 input instead (origin detail ``runtime:<name>``).
Attributes get role values (ksize/strides/padding/data_format/dilations, masks, num/num_split, keep_dims...),
their defaults, or other ``allowed_values``; an operator with a required attribute that has neither a role nor
allowed values is skipped (``op:unknown-attr:<name>``).

Dtypes are limited to those an unlabelled CPU kernel is registered for. Every candidate is validated in a sandboxed
worker, one operator per job (:mod:`dlci.exec`): first built in a graph (the op's shape function rejects most
invalid arguments there, ``rejected-static:<exception>``, before a kernel that would CHECK-fail on them runs), then
run eagerly twice (``tf.raw_ops.X(**kwargs)``, runtime inputs as tensors); a candidate that raises
(``rejected:<exception>``), returns non-numeric, empty or all-NaN outputs, or differs between the two runs
(``nondeterministic``: uninitialised outputs, e.g. Cholesky of a non-PD matrix) is dropped under that reason in
``stats["skipped"]``. TensorFlow aborts the process on some arguments (``ConjugateTranspose`` of a scalar in TF 2.21):
the worker dies, the candidate it was running is recorded in ``stats["crashes"]``, counted under
``crashed:<signal>`` and skipped, and the operator is harvested again without it. At most ``variants_per_op`` valid
candidates per operator are kept, chosen for diversity (dtypes, ranks, attribute values, value domains, runtime index
arguments; the plain float32 candidate first). ``stats`` also has ``modules`` (operators and instances per
generated TensorFlow module: math, nn, array, image, linalg, spectral...), ``ops_without_instances`` and
``nondeterministic_ops``.

Instance format (``call["kind"] == "tf_fn"``)::

    Instance(op="tf::<RawOp>", framework="keras",
             call={"kind": "tf_fn", "fn": "tf.raw_ops.<RawOp>", "kwargs": {<keyword>: {"$t": i} | JSON value}},
             inputs=[TensorSpec.of(a) ...], params={<attr / constant argument>: value},
             origin=Origin("tf_ops", "<RawOp>#<n> <detail>", "tensorflow <version>"),
             arrays={"in:<i>": ..., "expected:<j>": ...})

The keywords are those ``tf.raw_ops.<RawOp>`` accepts: the OpDef's input names (TensorFlow's Python API renames a
few: ``Sum``'s ``reduction_indices`` is ``axis``, ``Select``'s ``t``/``e`` are ``x``/``y``, ``Split``'s
``split_dim`` is ``axis``; inputs map to the function's parameters by position) and the attributes that are not
inferred from the inputs (type attributes such as ``T``/``Tidx`` and list lengths such as ``N`` are inferred and
never passed). A list input (``Pack``'s ``values``) is a JSON list of ``{"$t": i}``. Expected outputs: every output
tensor of the op, list outputs flattened, in order.

The package: :mod:`~dlci.sources.tf_ops.roles` (which operators, the role tables), :mod:`~dlci.sources.tf_ops.plan`
(OpDefs read into plans), :mod:`~dlci.sources.tf_ops.candidate`, :mod:`~dlci.sources.tf_ops.build`,
:mod:`~dlci.sources.tf_ops.consts` and :mod:`~dlci.sources.tf_ops.attrs` (building candidates),
:mod:`~dlci.sources.tf_ops.check` (validating them), :mod:`~dlci.sources.tf_ops.keep` (choosing the kept ones); here
the worker jobs and the source. The operators' value domains are in :mod:`dlci.operators.facts`.
"""
from __future__ import annotations

import collections
import json
import re
import time
from typing import Iterator

import numpy as np

from dlci.instance import Instance
from dlci.sources import Source, register
from dlci.sources._common import dist_version, harvest_in_workers
from dlci.sources.tf_ops.build import _Builder
from dlci.sources.tf_ops.candidate import _Cand, _Rt, _spec
from dlci.sources.tf_ops.check import _check
from dlci.sources.tf_ops.keep import _features, select, to_instance
from dlci.sources.tf_ops.plan import _Skip, _gen_module, _tf, op_reason, plan


# -- worker jobs ---------------------------------------------------------------------------------------------------

def catalog_job(payload: dict, *, stage_hook=None) -> dict:
    """Engine job: every raw op with its generated-module name and the reason it is skipped (None: harvested)."""
    tf = _tf()
    out = []
    for name in sorted(n for n in dir(tf.raw_ops) if not n.startswith("_")):
        try:
            reason = op_reason(name)
        except Exception as e:  # noqa: BLE001 - an odd OpDef: skip it, say why
            reason = f"opdef-error:{type(e).__name__}"
        out.append({"name": name, "module": _gen_module(getattr(tf.raw_ops, name)), "skip": reason})
    return {"ops": out, "version": tf.__version__}


def _cand_key(cand: _Cand) -> str:
    """Identity of a candidate's call: keywords, constants and the exact runtime arrays."""
    import hashlib

    def enc(v):
        if isinstance(v, _Rt):
            a = np.require(v.array, requirements="C")
            return f"{_spec(a)}:{hashlib.sha1(a.tobytes()).hexdigest()}"
        if isinstance(v, list) and v and isinstance(v[0], _Rt):
            return [enc(x) for x in v]
        return v
    return json.dumps({k: enc(v) for k, v in cand.kwargs.items()}, sort_keys=True, default=str)


def harvest_op(name: str, *, cap: int, candidates: int, skip=(), hook=None) -> tuple[list[Instance], dict]:
    """At most ``cap`` validated instances of raw op ``name`` from ``candidates`` generated ones."""
    tf = _tf()
    dropped: collections.Counter = collections.Counter()
    try:
        p = plan(name)
    except _Skip as e:
        return [], {"op_skip": e.reason, "dropped": {}, "tried": 0}
    valid: list = []
    seen: set = set()
    tried = 0
    for i in range(candidates):
        if f"{name}#{i}" in skip:  # a candidate that killed a worker before
            continue
        try:
            cand = _Builder(p, i).build()
        except _Skip as e:
            dropped[f"unbuilt:{e.reason}"] += 1
            continue
        except Exception as e:  # noqa: BLE001 - a role that does not fit this operator's arguments
            dropped[f"unbuilt:{type(e).__name__}"] += 1
            continue
        key = _cand_key(cand)
        if key in seen:
            dropped["duplicate-candidate"] += 1
            continue
        seen.add(key)
        tried += 1
        if hook is not None:
            hook(f"candidate {name}#{i}")
        outs, reason = _check(name, cand)
        if reason:
            dropped[reason] += 1
            continue
        cand.features = _features(cand)
        valid.append((cand, outs))
    kept = select(valid, cap)
    dropped["not-selected"] += len(valid) - len(kept)
    insts = [to_instance(name, cand, outs, tf.__version__) for cand, outs in kept]
    return insts, {"dropped": dict(dropped), "tried": tried, "valid": len(valid), "module": p.module,
                   "op_skip": None if kept else "no-valid-candidate"}


def harvest_job(payload: dict, *, stage_hook=None) -> dict:
    """Engine job (``dlci.sources.tf_ops:harvest_job``): :func:`harvest_op` in a sandboxed worker, plain data back."""
    insts, stats = harvest_op(payload["op"], cap=payload["cap"], candidates=payload["candidates"],
                              skip=set(payload.get("skip", ())), hook=stage_hook)
    return {"instances": [[i.to_meta(), dict(i.arrays)] for i in insts], "stats": stats}


# -- the source ----------------------------------------------------------------------------------------------------

def _strip(name: str) -> str:
    s = name.strip()
    for p in ("tf::", "tensorflow::", "tf.raw_ops.", "raw_ops.", "tflite::", "tf.compat.v1.", "tf."):
        if s.startswith(p):
            s = s[len(p):]
    return s.rsplit(".", 1)[-1]


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@register
class TfOpsSource(Source):
    name = "tf_ops"
    framework = "keras"
    description = "TensorFlow raw ops (tf.raw_ops), one call each, arguments derived from the registered OpDefs"
    default_limit_per_op = None  # None: variants_per_op
    per_op = True  # `ops` given: only those operators are harvested (gather passes the wanted ones)
    variants_per_op = 8
    candidates_per_op = 48
    workers = 2
    job_timeout = 180.0  # one operator's candidates in a worker
    max_rounds = 6  # re-runs of an operator whose worker died (each without the candidates that killed it)
    warm_imports = ("tensorflow",)
    # (test hook) Engine job function per operator: "module:function"
    job_func = f"{__name__}:harvest_job"

    def library_versions(self) -> dict[str, str]:
        v = dist_version("tensorflow")
        return {"tensorflow": v if v != "missing" else dist_version("tensorflow-cpu")}

    def cache_extra(self) -> dict:
        return {"variants_per_op": self.variants_per_op, "candidates_per_op": self.candidates_per_op,
                "job": self.job_func}

    def wants(self, raw: str) -> bool:
        """Whether raw op ``raw`` is among ``self.ops`` (raw, ``tf::X``, canonical or TFLite spellings)."""
        if self.ops is None:
            return True
        own = {_squash(raw), _squash(re.sub(r"V\d+$", "", raw))}
        for o in self.ops:
            if _squash(_strip(o)) in own:
                return True
        from dlci import operators
        try:
            return bool(operators.select([f"tf::{raw}"], set(self.ops)))
        except Exception:  # noqa: BLE001 - identity tables unavailable: names only
            return False

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        import os
        from dlci.exec import Engine, Job
        cap = limit_per_op if limit_per_op is not None else self.variants_per_op
        t0 = time.monotonic()
        results: dict[str, list[Instance]] = {}
        modules: dict[str, str] = {}
        self.stats["crashes"] = []
        self.stats["candidates"] = {"tried": 0, "valid": 0}
        with Engine(workers=max(1, min(self.workers, os.cpu_count() or 1)), timeout=self.job_timeout,
                    warm_imports=self.warm_imports + (__name__,)) as eng:
            catalog: dict = {}

            def on_catalog(job, res):
                catalog.update(res)

            info = eng.run([Job(id="catalog", func=f"{__name__}:catalog_job", args=({},), op="catalog",
                                instance_id="catalog", target=self.name)], on_catalog)
            if info.interrupted:
                raise InterruptedError(f"{self.name} harvest interrupted ({info.reason})")
            if "ops" not in catalog:
                raise RuntimeError(f"{self.name}: listing the raw ops failed: {catalog.get('message', catalog)}")
            todo = []
            for entry in catalog["ops"]:
                if not self.wants(entry["name"]):
                    continue
                modules[entry["name"]] = entry["module"]
                if entry["skip"]:
                    self.skip(f"op:{entry['skip']}")
                else:
                    todo.append(entry["name"])
            self.stats["ops_considered"] = len(modules)
            order = list(todo)

            def on_done(op, res) -> bool:
                if "instances" not in res:
                    return False
                results[op] = [Instance.from_meta(m, a) for m, a in res["instances"]]
                st = res["stats"]
                for reason, n in st.get("dropped", {}).items():
                    if reason != "not-selected":
                        self.skip(reason, n)
                if st.get("dropped", {}).get("nondeterministic"):  # two eager runs disagreed
                    self.stats.setdefault("nondeterministic_ops", {})[op] = st["dropped"]["nondeterministic"]
                self.stats["candidates"]["tried"] += st.get("tried", 0)
                self.stats["candidates"]["valid"] += st.get("valid", 0)
                if st.get("op_skip"):
                    self.skip(f"op:{st['op_skip']}")
                return True

            harvest_in_workers(self, eng, todo, lambda op, skip: {"op": op, "cap": cap,
                                                                  "candidates": self.candidates_per_op,
                                                                  "skip": skip},
                               on_done, job_func=self.job_func, max_rounds=self.max_rounds)
        per_module: dict[str, dict[str, int]] = {}
        for op, mod in modules.items():
            m = per_module.setdefault(mod, {"ops": 0, "harvested_ops": 0, "instances": 0})
            m["ops"] += 1
            if results.get(op):
                m["harvested_ops"] += 1
                m["instances"] += len(results[op])
        self.stats["modules"] = dict(sorted(per_module.items()))
        self.stats["ops_without_instances"] = sorted(op for op in order if not results.get(op))
        self.stats["harvest_seconds"] = round(time.monotonic() - t0, 1)
        for op in order:
            yield from results.get(op, [])


__all__ = ["TfOpsSource", "harvest_op", "harvest_job", "catalog_job"]
