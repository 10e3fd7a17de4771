"""Categories 11 and 15, pipeline and batch: the whole batch at once vs through a DataLoader, one sample at a time,
or torch.vmap. Which inputs carry the batch comes from metadata (aten tags, the documented Shape sections)."""
import inspect

import torch

from dlci.rules.torch.common import (dec, encoded_call, forward_slots, is_fn, leaves, module_forms, na, pointwise,
                                     resolve)
from dlci.rules.torch.docs import defaults, form_of, shape_doc


def batch_slots(case, ts):
    """The inputs that carry the batch in dim 0 (split those; the others go whole to each sample).

    From metadata only: aten operators tagged pointwise split every input of the broadcast rank; otherwise the
    module's (or the function's module form's) documented Shape section, matched by parameter name, must give the
    tensor a form starting with N, and the parameters whose documented meaning reduces over dim 0 must not do so
    (dim, normalized_shape, reduction, batch statistics)."""
    shapes = [tuple(t.shape) for t in ts]
    if not shapes or not shapes[0]:
        na("input 0 has no dim 0")
    if pointwise(case.op):
        rank = max(len(s) for s in shapes)
        full = [i for i, s in enumerate(shapes) if len(s) == rank]
        n = max(shapes[i][0] for i in full)
        if len(shapes[0]) != rank or shapes[0][0] != n or n < 2:
            na("input 0 does not carry a broadcast dim 0 of size >= 2")
        return [i for i in full if shapes[i][0] == n]
    if is_fn(case):
        fn, enc = encoded_call(case)
        classes = module_forms(case.call["fn"].rsplit(".", 1)[1])
        slots = {k: v["$t"] for k, v in enc.items() if isinstance(v, dict) and "$t" in v}
        known = {**defaults(fn), **{k: dec(v, ts) for k, v in enc.items()}}
        params = {k: known[k] for k in ("dim", "normalized_shape", "reduction", "training") if k in known}
        batch_stats = params.get("training") is True
    else:
        classes = [resolve(case.call["cls"])]
        slots = forward_slots(case)
        m = case.build_model().m
        params = {k: getattr(m, k) for k in ("dim", "normalized_shape", "reduction") if hasattr(m, k)}
        batch_stats = getattr(m, "running_mean", 0) is None
    docs = [d for d in (shape_doc(c) for c in classes) if d]
    if not docs:
        na("no documented Shape section")
    if batch_stats and any("batch statistics" in (inspect.getdoc(c) or "") for c in classes):
        na("normalizes with batch statistics (documented)")
    n, rank0 = shapes[0][0], len(shapes[0])
    if n < 2:
        na("batch of size < 2")
    if "dim" in params:
        d = params["dim"]
        if not isinstance(d, int) or d % max(rank0, 1) == 0:
            na(f"dim={d!r} is (or implicitly picks) dim 0")
    if "normalized_shape" in params:
        ns = params["normalized_shape"]
        if (len(ns) if isinstance(ns, (list, tuple, torch.Size)) else 1) >= rank0:
            na("normalized_shape covers dim 0")
    if params.get("reduction", "none") != "none":
        na(f"reduction={params['reduction']!r} reduces over the batch")
    split = []
    for name, slot in slots.items():
        keys = [name.lower() if name.lower() in d else "input" if slot == 0 and "input" in d else None for d in docs]
        if not any(keys):
            if slot != 0 and shapes[slot] == shapes[0]:
                na(f"{name} has the batch input's shape but no documented shape")
            continue  # not documented as data (weights, running stats): passed whole
        forms = {form_of(d[k], len(shapes[slot])) for d, k in zip(docs, keys) if k} - {None}
        if forms != {"batch"}:
            na(f"{name}: " + ("unbatched form" if forms else "no documented form of this rank"))
        if shapes[slot][0] != n:
            na(f"{name}: dim 0 is {shapes[slot][0]}, not the batch size {n}")
        split.append(slot)
    if 0 not in split:
        na("input 0 has no documented batch dim")
    return sorted(split)


def data_loader(case, inputs):
    """The batch inputs through DataLoader(TensorDataset(...), batch_size=ceil(N / 2)), outputs concatenated."""
    ts = case.to_torch(inputs)
    slots = batch_slots(case, ts)
    n = ts[slots[0]].shape[0]
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*[ts[i] for i in slots]),
                                         batch_size=(n + 1) // 2, shuffle=False)
    model, parts = case.build_model(), []
    with torch.no_grad():
        for batch in loader:
            full = list(ts)
            for i, b in zip(slots, batch):
                full[i] = b
            parts.append(leaves(model(*full)))
    return case.flatten([torch.cat(p) for p in zip(*parts)])


def one_by_one(case, inputs):
    """Each sample alone (a batch of one), outputs concatenated."""
    ts = case.to_torch(inputs)
    slots = batch_slots(case, ts)
    model, parts = case.build_model(), []
    with torch.no_grad():
        for j in range(ts[slots[0]].shape[0]):
            parts.append(leaves(model(*[t[j:j + 1] if i in slots else t for i, t in enumerate(ts)])))
    return case.flatten([torch.cat(p) for p in zip(*parts)])


def vmapped(case, inputs):
    """torch.vmap over the batch: each mapped call sees one sample as a batch of one (N, ...) -> (N, 1, ...)."""
    ts = case.to_torch(inputs)
    slots = batch_slots(case, ts)
    model = case.build_model()
    xs = [t.unsqueeze(1) if i in slots else t for i, t in enumerate(ts)]
    dims = tuple(0 if i in slots else None for i in range(len(ts)))
    with torch.no_grad():
        out = torch.vmap(lambda *a: tuple(leaves(model(*a))), in_dims=dims)(*xs)
    return case.flatten([o.reshape((o.shape[0] * o.shape[1],) + tuple(o.shape[2:])) for o in out])
