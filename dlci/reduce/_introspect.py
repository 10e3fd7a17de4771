"""What a recipe's callable accepts: parameter names and which have defaults (torch functions and module classes),
and the default configuration of a keras layer class.

Runs where the framework is importable: in a sandboxed worker (:func:`job`, the engine's job function), in a fresh
interpreter (``python -m dlci.reduce._introspect`` reads the request as JSON on stdin), or in-process when the
framework is already imported. The reducer itself never imports torch, keras or TensorFlow.

Request: ``{"torch_fn": [path, ...], "torch_module": [class path, ...], "keras": [[class path, config], ...]}``.
Answer: ``{"ok": true, "torch_fn": {path: params | null}, "torch_module": {path: params | null},
"keras": {key: {"required": [...], "defaults": {...}} | null}}`` where params is a list of
``{"name", "has_default", "keyword"}`` in positional order (``keyword``: the argument may be passed by name).
"""
from __future__ import annotations

import ast
import inspect
import json
import re
import sys
from typing import Any

MARKER = "DLCI-INTROSPECT "  # the answer line on stdout (libraries may print too)
_DOC_SIG = re.compile(r"^\s*([A-Za-z_][\w.]*)\((.*)\)\s*(->.*)?$")


def _from_signature(sig: inspect.Signature) -> list[dict] | None:
    out = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            if p.kind == p.VAR_POSITIONAL:
                return out + [{"name": "*" + p.name, "has_default": False, "keyword": False, "var": True}]
            continue
        out.append({"name": p.name, "has_default": p.default is not p.empty,
                    "keyword": p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY),
                    "kwonly": p.kind == p.KEYWORD_ONLY})
    return out


def doc_signature(doc: str) -> ast.arguments | None:
    """The parameters of the signature on the first line of a torch builtin's docstring
    (``avg_pool2d(input, kernel_size, stride=None, ...) -> Tensor``), parsed as a Python ``def``'s; None if none."""
    first = next((ln for ln in (doc or "").splitlines() if ln.strip()), "")
    m = _DOC_SIG.match(first)
    if not m:
        return None
    try:
        return ast.parse(f"def f({m.group(2)}): pass").body[0].args
    except SyntaxError:
        return None


def _from_docstring(doc: str) -> list[dict] | None:
    """Parameters in positional order as dicts (``name``, ``has_default``, ``default`` where it is a literal,
    ``keyword``, ``kwonly``, ``var`` for ``*args``, named ``*<name>``), from a torch builtin's docstring."""
    a = doc_signature(doc)
    if a is None:
        return None

    def literal(node) -> dict:
        try:
            return {"default": ast.literal_eval(node)}
        except (ValueError, SyntaxError, TypeError):
            return {}
    pos = a.posonlyargs + a.args
    first_default = len(pos) - len(a.defaults)
    out = [{"name": arg.arg, "has_default": i >= first_default, "keyword": i >= len(a.posonlyargs),
            "kwonly": False, **(literal(a.defaults[i - first_default]) if i >= first_default else {})}
           for i, arg in enumerate(pos)]
    if a.vararg is not None:
        out.append({"name": "*" + a.vararg.arg, "has_default": False, "keyword": False, "var": True})
    out += [{"name": arg.arg, "has_default": d is not None, "keyword": True, "kwonly": True,
             **(literal(d) if d is not None else {})} for arg, d in zip(a.kwonlyargs, a.kw_defaults)]
    return out


def _fits(arg_type: str, value: Any) -> bool:
    """Whether an encoded call argument can bind to an ATen schema argument of ``arg_type`` (as the schema's
    Python view prints it: ``Tensor``, ``int``, ``Optional[List[int]]``, ``number``...)."""
    optional = arg_type.startswith("Optional[")
    t = arg_type[len("Optional["):-1] if optional else arg_type
    tensor = isinstance(value, dict) and "$t" in value
    if value is None:
        return optional
    if tensor:
        return t == "Tensor"
    if t.startswith("List["):
        inner = t[5:-1]
        if isinstance(value, list) or (isinstance(value, dict) and "$tuple" in value):
            return True
        return inner == "int" and isinstance(value, int) and not isinstance(value, bool)  # int[1] takes an int
    if isinstance(value, bool):
        return t in ("bool", "number", "Scalar")
    if isinstance(value, int):
        return t in ("int", "number", "Scalar", "float", "SymInt")
    if isinstance(value, float) or (isinstance(value, dict) and "$float" in value):
        return t in ("float", "number", "Scalar")
    if isinstance(value, dict) and "$dtype" in value:
        return t == "int"  # a ScalarType shows as int in the schema's Python view
    if isinstance(value, str):
        return t in ("str",)
    return False


def aten_params(path: str, args: list | None) -> list[dict] | None:
    """Parameters of a torch builtin read from the ATen schemas of its overloads (``torch.log_softmax`` and other
    builtins whose docstring names one overload only): the first overload (out= variants aside) that the call's
    positional ``args`` bind to, in order and by type."""
    name = path.rsplit(".", 1)[-1]
    if not path.startswith(("torch.", "torch.nn.functional.", "torch.Tensor.", "torch.special.", "torch.linalg.",
                            "torch.fft.")) or args is None:
        return None
    import torch
    prefix = {"torch.special.": "special_", "torch.linalg.": "linalg_", "torch.fft.": "fft_"}
    op = next((prefix[p] + name for p in prefix if path.startswith(p)), name)
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{op}")
    except RuntimeError:
        return None
    for schema in schemas:
        if schema.overload_name.endswith("out") or any(a.is_out for a in schema.arguments):
            continue
        positional = [a for a in schema.arguments if not a.kwarg_only]
        if len(args) > len(positional) or any(not _fits(str(a.type), v) for a, v in zip(positional, args)):
            continue
        if any(not a.has_default_value() for a in positional[len(args):]):
            continue
        return [{"name": "input" if i == 0 and a.name == "self" and not path.startswith("torch.Tensor.")
                 else a.name, "has_default": a.has_default_value(), "keyword": True, "kwonly": bool(a.kwarg_only)}
                for i, a in enumerate(schema.arguments)]
    return None


def torch_fn_params(path: str, args: list | None = None) -> list[dict] | None:
    from dlci.instance.recipe import try_resolve
    fn = try_resolve(path)
    if fn is None:
        return None
    schema = getattr(fn, "_schema", None)
    if schema is not None:  # torch.ops.aten.<op>.<overload>
        return [{"name": a.name, "has_default": a.has_default_value(), "keyword": True,
                 "kwonly": bool(a.kwarg_only)} for a in schema.arguments]
    try:
        params = _from_signature(inspect.signature(fn))
    except (TypeError, ValueError):
        params = _from_docstring(getattr(fn, "__doc__", "") or "")
        if params is not None and path.startswith("torch.Tensor.") and (not params or params[0]["name"] != "self"):
            # method docs omit self; the recipe passes the tensor as the first positional argument
            params = [{"name": "self", "has_default": False, "keyword": False, "kwonly": False}] + params
        positional = [p for p in params or [] if not p.get("kwonly")]
        if params is None or (args is not None and len(args) > len(positional)):
            params = aten_params(path, args) or params  # the docstring named another overload, or none
    return params


def torch_module_params(path: str) -> list[dict] | None:
    from dlci.instance.recipe import try_resolve
    cls = try_resolve(path)
    if cls is None:
        return None
    try:
        return _from_signature(inspect.signature(cls))
    except (TypeError, ValueError):
        return None


def _plain(v: Any) -> Any:
    return json.loads(json.dumps(v, default=str))


def keras_defaults(path: str, config: dict) -> dict | None:
    """The configuration of the layer class built with only its required arguments (from ``config``)."""
    from dlci.instance.recipe import try_resolve
    cls = try_resolve(path)
    if cls is None:
        return None
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return None
    required = [p.name for p in sig.parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    try:
        base = {k: config[k] for k in required if k in config}
        layer = cls.from_config(base) if hasattr(cls, "from_config") else cls(**base)
        defaults = _plain(layer.get_config())
    except Exception:  # noqa: BLE001 - a required argument the config does not hold, or an odd constructor
        return None
    return {"required": required, "defaults": defaults}


def answer(request: dict) -> dict:
    out: dict = {"ok": True, "torch_fn": {}, "torch_module": {}, "keras": {}}
    for path in request.get("torch_fn", []):
        try:
            out["torch_fn"][path] = torch_fn_params(path)
        except Exception:  # noqa: BLE001
            out["torch_fn"][path] = None
    for path in request.get("torch_module", []):
        try:
            out["torch_module"][path] = torch_module_params(path)
        except Exception:  # noqa: BLE001
            out["torch_module"][path] = None
    for path, config in request.get("keras", []):
        try:
            out["keras"][keras_key(path, config)] = keras_defaults(path, config)
        except Exception:  # noqa: BLE001
            out["keras"][keras_key(path, config)] = None
    return out


def keras_key(path: str, config: dict) -> str:
    return path + "|" + json.dumps(config, sort_keys=True, default=str)


def job(request: dict, *, stage_hook=None) -> dict:
    """Engine job function (``dlci.reduce._introspect:job``)."""
    return answer(request)


def main() -> int:
    import warnings
    warnings.simplefilter("ignore")
    request = json.loads(sys.stdin.read() or "{}")
    print(MARKER + json.dumps(answer(request)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
