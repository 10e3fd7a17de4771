"""What PyTorch's documentation says, read without importing torch: signatures and the call lines docstrings open
with, the Shape sections of nn module docstrings, and docstring entries. Used by the rules' graphs (and pasted into
their reproducers) and by the applicability checks in dlci.rules.torch.meta."""
import ast
import inspect
import re


def split_top(text):
    """Split on the commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "({[" and 1 or ch in ")}]" and -1 or 0
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


def call_line(obj):
    """The first line of a docstring (torch builtins document their signature there, e.g. ``conv2d(input, weight,
    bias=None, stride=1, ...) -> Tensor``)."""
    return next((ln.strip() for ln in (obj.__doc__ or "").splitlines() if ln.strip()), "")


def param_names(obj):
    """Parameter names: the signature, else the call line the docstring opens with. Classes: the constructor's."""
    try:
        ps = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
        if not any(p.kind is p.VAR_POSITIONAL for p in ps):
            return [p.name for p in ps if p.kind is not p.VAR_KEYWORD]
    except (TypeError, ValueError):
        pass
    m = re.match(r"^[\w.]+\((.*)\)", call_line(obj))
    names = [re.match(r"\s*\**(\w+)", p) for p in split_top(m.group(1))] if m else []
    return [n.group(1) for n in names if n]


def defaults(obj):
    """Parameter defaults: the signature's, else the ``name=value`` parts of the docstring's call line."""
    try:
        ps = inspect.signature(obj).parameters.values()
        if not any(p.kind is p.VAR_POSITIONAL for p in ps):
            return {p.name: p.default for p in ps if p.default is not p.empty}
    except (TypeError, ValueError):
        pass
    out = {}
    for name, value in re.findall(r"(\w+)\s*=\s*([^,()]+|\([^()]*\))", call_line(obj)):
        try:
            out[name] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            pass
    return out


def shape_doc(cls):
    """The class docstring's Shape section: entry name (lower case) -> shape alternatives (tuples of dim symbols),
    e.g. Conv2d: {"input": [("N", "C_{in}", "H_{in}", "W_{in}"), ("C_{in}", "H_{in}", "W_{in}")], ...}."""
    doc = inspect.getdoc(cls) or ""
    m = re.search(r"^Shape:\s*$(.*?)(?=^\S|\Z)", doc, re.M | re.S)
    out, name = {}, None
    for line in m.group(1).splitlines() if m else []:
        e = re.match(r"^\s*[-*]\s*(\w+)\s*:\s*(.*)$", line)
        if e:
            name, line = e.group(1).lower(), e.group(2)
            out[name] = []
        if name is None:
            continue
        for a, b in re.findall(r":math:`\(([^`]*)\)`|`\(([^`]*)\)`", line):
            out[name].append(tuple(d.strip() for d in split_top(a or b) if d.strip()))
    return out


def is_star(dim):
    return "*" in dim or "ast" in dim or dim == "..."


def form_of(alts, ndim):
    """"batch" when the documented form of this rank starts with the batch symbol N (or any leading dims *),
    "unbatched" when the fitting form lacks it, None when no documented form has this rank."""
    for alt in alts:
        fixed = [d for d in alt if not is_star(d)]
        if not (ndim >= len(fixed) if len(fixed) < len(alt) else ndim == len(alt)):
            continue
        first = alt[0] if alt else ""
        if first in ("N", "B", "minibatch") or first.startswith("N_"):
            return "batch"
        return "batch" if is_star(first) and ndim > len(fixed) else "unbatched"
    return None


def doc_entries(*objs):
    """name -> text of the ``name: ...`` / ``* **name**: ...`` / ``- **name** - ...`` entries of docstrings."""
    out = {}
    for obj in objs:
        name = None
        for line in (inspect.getdoc(obj) or "").splitlines():
            if not line.strip():
                name = None  # a blank line ends an entry (the next section may follow)
                continue
            m = re.match(r"^\s*(?:[-*]\s*)?(?:\*\*)?(\w+)(?:\*\*)?\s*(?::|\s-\s)\s*(.*)$", line)
            if m and (line.lstrip()[:1] in ("-", "*") or re.match(r"^\s*\w+:\s", line)):
                name = m.group(1)
                out[name] = out.get(name, "") + " " + m.group(2)
            elif name is not None:
                out[name] += " " + line.strip()
    return out
