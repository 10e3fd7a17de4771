"""Helpers shared by targets: where an exception was raised, and the 'unsupported' message shapes."""
from __future__ import annotations

import re
import traceback

# an explicit rejection: "X is not supported", "Unsupported dtype ...", "not implemented for ...", and a converter's
# statement of its own limitation ("Only constant axes currently supported", "TopK k must be a constant")
NOT_SUPPORTED = re.compile(r"\bnot (yet )?supported\b|\bunsupported\b|\bnot (yet )?implemented\b|"
                           r"\b(do|does) not support\b|\bonly (constant|static)\b|\bmust be (a )?(constant|static)\b|"
                           r"\bcurrently supported\b", re.I)


def raised_in(exc: BaseException, prefixes: tuple[str, ...]) -> bool:
    """Was the exception raised by code under one of these module prefixes (its innermost frame)?"""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return False
    mod = last.tb_frame.f_globals.get("__name__", "")
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def type_name(exc: BaseException) -> str:
    return type(exc).__name__


def format_exc(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def onnx_fingerprint(model) -> str:
    """A fingerprint of an ONNX model (ModelProto) that names do not change: nodes in order with their op, domain,
    attributes and the positions of the values they read; graph inputs' and outputs' types; initializers' bytes; the
    local functions likewise. Two exporters (or two revisions of one) that emit the same computation under other
    value names give the same fingerprint."""
    import hashlib

    h = hashlib.sha256()

    def graph(g, outer: dict) -> None:
        ids = dict(outer)

        def ref(name: str) -> str:
            return ids.get(name, "?" if name else "-")
        for i, vi in enumerate(g.input):
            ids[vi.name] = f"i{i}"
            h.update(vi.type.SerializeToString(deterministic=True))
        for i, t in enumerate(g.initializer):
            ids[t.name] = f"w{i}"
            h.update(t.SerializeToString(deterministic=True).replace(t.name.encode(), b""))
        for n, node in enumerate(g.node):
            h.update(f"|{node.domain}:{node.op_type}({','.join(ref(x) for x in node.input)})".encode())
            for a in sorted(node.attribute, key=lambda a: a.name):
                if a.g.ByteSize() or a.graphs:
                    for sub in ([a.g] if a.g.ByteSize() else []) + list(a.graphs):
                        graph(sub, ids)
                    continue
                a2 = type(a)()
                a2.CopyFrom(a)
                h.update(a2.SerializeToString(deterministic=True))
            for k, out in enumerate(node.output):
                ids[out] = f"n{n}.{k}"
        for vi in g.output:
            h.update(f"->{ref(vi.name)}".encode())
            h.update(vi.type.SerializeToString(deterministic=True))

    graph(model.graph, {})
    for f in sorted(model.functions, key=lambda f: (f.domain, f.name)):
        h.update(f"fn {f.domain}:{f.name}({len(f.input)})".encode())
        ids = {name: f"i{i}" for i, name in enumerate(f.input)}
        for n, node in enumerate(f.node):
            h.update(f"|{node.domain}:{node.op_type}({','.join(ids.get(x, '?') for x in node.input)})".encode())
            for a in sorted(node.attribute, key=lambda a: a.name):
                h.update(a.SerializeToString(deterministic=True))
            for k, out in enumerate(node.output):
                ids[out] = f"n{n}.{k}"
    return h.hexdigest()[:16]
