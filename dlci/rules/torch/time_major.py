"""Category 10, time major: a sequence module with batch_first flipped, on transposed inputs."""
import inspect
import re

import torch

from dlci.rules.torch.common import forward_args, forward_slots, leaves, make, na, resolve, the_call
from dlci.rules.torch.docs import defaults, doc_entries, param_names


def sequence_layout(cls):
    """(documented entries, forward parameters whose documented shape depends on batch_first, output positions
    whose documented shape does): from the class docstring, the forward's, and the class it defers to."""
    docs = [cls, cls.forward]
    ref = re.search(r"see the docs in :class:`~?torch\.nn\.(\w+)`", inspect.getdoc(cls.forward) or "")
    if ref:
        docs.append(getattr(torch.nn, ref.group(1)).forward)
    entries = doc_entries(*docs)
    inputs = [n for n in param_names(cls.forward) if "batch_first" in entries.get(n, "")]
    outputs = ["output"]
    for obj in docs:
        m = re.search(r"^\s*Outputs:\s*(.*)$", inspect.getdoc(obj) or "", re.M)
        if m:
            tail = (inspect.getdoc(obj) or "")[m.end():]
            outputs = re.findall(r"\w+", m.group(1)) or re.findall(r"^\s*[-*]\s*\*\*(\w+)\*\*", tail, re.M)
            break
    return entries, inputs, [i for i, n in enumerate(outputs) if "batch_first" in entries.get(n, "")]


def layout_plan(case, ts):
    """(input slots to transpose, output positions to transpose back, batched?) from the documented shapes."""
    cls = resolve(case.call["cls"])
    if "batch_first" not in param_names(cls):
        na("the constructor has no batch_first parameter")
    entries, names, outs = sequence_layout(cls)
    slots = forward_slots(case)
    if not names or not outs or not any(n in slots for n in names):
        na("no input/output documented in terms of batch_first")
    for n in slots:
        if not re.search(r":math:`|`\(", entries.get(n, "")):
            na(f"the shape of {n!r} is not documented")
    seq = [slots[n] for n in names if n in slots]
    batched = ts[seq[0]].ndim == 3  # the docs' (L, N, H) / (N, L, H); (L, H) is unbatched
    return seq, outs, batched


def other_layout(case, inputs):
    """The other layout: batch_first flipped, same weights, sequence inputs and outputs transposed (dims 0 and 1).
    Unbatched inputs stay as they are: the docs say batch_first is ignored for them."""
    ts = case.to_torch(inputs)
    seq, outs, batched = layout_plan(case, ts)
    cls, kw = the_call(case, ts)
    batch_first = kw.get("batch_first", defaults(cls).get("batch_first", False))
    m = make(cls, {**kw, "batch_first": not batch_first}, case.build_model().m.state_dict())
    a, k = forward_args(case, [t.transpose(0, 1) if batched and i in seq else t for i, t in enumerate(ts)])
    with torch.no_grad():
        out = leaves(m(*a, **k))
    return case.flatten([o.transpose(0, 1) if batched and i in outs else o for i, o in enumerate(out)])
