"""Python frontends whose converters hang off a convert map: which map entries reach a changed function.

A Python frontend (TVM's Relax importers, and any frontend of the same shape) keeps a dict from operator names to
converters: ``"softplus.default": self._softplus``, ``nn.Softplus: self._softplus_module``, ``"Elu": Elu`` (a converter
class), ``"ABS": functools.partial(self._convert_unary_elemwise, relax_op=_op.abs)``. We parse those maps with ``ast``,
build a call graph over the frontend's functions and classes (``self.x`` / ``cls.x`` resolved through the owning
class's bases, bare names through the module level of every file in the set, converter classes through their
inheritance chain), and select every entry from which a changed function is reachable. That is what makes a change to
a shared helper (``_avg_pool2d_impl``, ``Pool._impl_v1``, ``autopad``) select each operator that uses it, and only
those.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

from dlci.profiles._tables import dotted

# names under which frontends import the library's own operator layer (relax.op.nn.avg_pool2d, _op.abs, topi.x)
LIBRARY_ROOTS = frozenset({"relax", "_op", "op", "topi", "tvm", "R"})


@dataclass
class Func:
    qualname: str            # "Class.method" or "function"
    file: str
    start: int
    end: int
    owner: str | None        # class name for methods
    refs: set = field(default_factory=set)  # ("self", name) | ("name", name) | ("attr", Cls, name) | ("chain", "a.b.c")


@dataclass
class Cls:
    name: str
    file: str
    start: int
    end: int
    bases: list[str]
    methods: dict[str, str] = field(default_factory=dict)  # method name -> qualname


@dataclass
class Entry:
    key: str                 # the operator as the map names it
    namespace: str
    file: str
    start: int
    end: int
    owner: str | None        # class whose method builds the map (context for self.x)
    refs: set
    converter: str           # readable: what the entry calls


def _refs_of(node: ast.AST) -> set:
    """Every reference in ``node`` that could lead to frontend code."""
    refs = set()
    nodes = list(ast.walk(node))
    # a class named only as the base of an attribute (``Base._helper(...)``) is not a reference to the whole class
    qualifiers = {id(sub.value) for sub in nodes if isinstance(sub, ast.Attribute)}
    for sub in nodes:
        if isinstance(sub, ast.Attribute):
            base = sub.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                refs.add(("self", sub.attr))
            elif isinstance(base, ast.Name):
                refs.add(("attr", base.id, sub.attr))
            elif isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
                refs.add(("self", sub.attr))
            elif isinstance(base, ast.Call) and isinstance(base.func, ast.Name):
                refs.add(("attr", base.func.id, sub.attr))  # ``Importer(...).from_fx(...)``: a method of that class
            chain = dotted(sub)
            if chain:
                refs.add(("chain", chain))
        elif isinstance(sub, ast.Name) and id(sub) not in qualifiers:
            refs.add(("name", sub.id))
    return refs


class PyIndex:
    """Functions, classes and convert-map entries of a set of Python files (one revision)."""

    def __init__(self):
        self.funcs: dict[str, Func] = {}
        self.classes: dict[str, Cls] = {}
        self.entries: list[Entry] = []

    def add_file(self, path: str, text: str, map_namespace) -> bool:
        """Index one file; ``map_namespace(key_node) -> namespace or None`` decides which dict entries are operators.
        Returns False when the file does not parse (the caller reports it)."""
        part = _file_index(path, text, map_namespace)
        if part is None:
            return False
        for fn in part.funcs.values():
            self.funcs.setdefault(fn.qualname, fn)
        for cls in part.classes.values():
            self.classes.setdefault(cls.name, cls)
        self.entries += part.entries
        return True

    def _index(self, path: str, text: str, map_namespace) -> bool:
        tree = _parse(text)
        if tree is None:
            return False
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._add_func(node, path, None)
            elif isinstance(node, ast.ClassDef):
                cls = Cls(node.name, path, _start(node), node.end_lineno, [_base_name(b) for b in node.bases])
                self.classes.setdefault(node.name, cls)
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        cls.methods[item.name] = self._add_func(item, path, node.name).qualname
        for fn_owner, dict_node in _convert_maps(tree):
            for k, v in zip(dict_node.keys, dict_node.values):
                if k is None:  # **other_map
                    continue
                ns = map_namespace(k)
                if ns is None:
                    continue
                key = k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else ast.unparse(k)
                self.entries.append(Entry(key, ns, path, k.lineno, v.end_lineno, fn_owner, _refs_of(v),
                                          ast.unparse(v)[:120]))
        return True

    def _add_func(self, node, path: str, owner: str | None) -> Func:
        qual = f"{owner}.{node.name}" if owner else node.name
        fn = Func(qual, path, _start(node), node.end_lineno, owner, _refs_of(node))
        self.funcs.setdefault(qual, fn)
        return fn

    # -- resolution ---------------------------------------------------------------------------------------------
    def mro(self, cls: str | None) -> list[str]:
        out, todo = [], [cls] if cls else []
        while todo:
            c = todo.pop(0)
            if c in self.classes and c not in out:
                out.append(c)
                todo.extend(self.classes[c].bases)
        return out

    def method(self, cls: str | None, name: str) -> str | None:
        for c in self.mro(cls):
            if name in self.classes[c].methods:
                return self.classes[c].methods[name]
        return None

    def reach(self, refs: set, context: str | None, program: bool = False) -> tuple[set[str], set[str]]:
        """Functions and classes reachable from ``refs`` evaluated in class ``context``; plus library call chains.

        ``program``: the refs are an importer's own code (``from_onnx``), not a convert-map entry. A class it names is
        instantiated (its ``__init__`` runs, not every method as for a converter class), a method called on an
        untyped object (``g.from_onnx(...)``) is looked up on the classes instantiated on the way, and a function that
        builds a convert map is followed outside the map only: the converters are dispatched per node, not per graph.
        """
        seen_f: set[tuple[str, str | None]] = set()
        classes: set[str] = set()
        chains: set[str] = set()
        made: list[str] = []       # program: classes instantiated so far
        called: set[str] = {"__init__"}  # program: method names called on untyped objects so far
        todo = [(refs, context)]
        while todo:
            refs, ctx = todo.pop()
            for ref in refs:
                kind = ref[0]
                targets: list[tuple[str, str | None]] = []
                if kind == "self":
                    q = self.method(ctx, ref[1])
                    if q:
                        targets.append((q, ctx))
                elif kind == "name":
                    if ref[1] in self.funcs:
                        targets.append((ref[1], None))
                    elif program and ref[1] in self.classes:
                        if ref[1] not in made:
                            made.append(ref[1])
                            classes.add(ref[1])
                            targets += [(q, ref[1]) for m in called if (q := self.method(ref[1], m))]
                    elif ref[1] in self.classes and ref[1] not in classes:
                        # a converter class: the dispatcher calls its _impl_vN, so every method in its chain counts
                        for c in self.mro(ref[1]):
                            classes.add(c)
                        targets += [(q, ref[1]) for c in self.mro(ref[1]) for q in self.classes[c].methods.values()]
                elif kind == "attr":
                    if ref[1] in self.classes:
                        q = self.method(ref[1], ref[2])
                        if q:
                            targets.append((q, ref[1]))
                    elif program:
                        called.add(ref[2])
                        targets += [(q, c) for c in made if (q := self.method(c, ref[2]))]
                elif kind == "chain":
                    chains.add(ref[1])
                for q, c in targets:
                    if (q, c) not in seen_f:
                        seen_f.add((q, c))
                        todo.append((self._outside_maps(q) if program else self.funcs[q].refs, c))
        for c in list(classes):
            classes.update(self.mro(c))
        classes.update(self.mro(context))
        return {q for q, _ in seen_f}, classes | {"#chain:" + c for c in chains}

    def _outside_maps(self, qualname: str) -> set:
        """A function's refs less those of the convert-map entries written inside it (``__init__`` builds the
        TFLite map, ``create_convert_map`` the torch ones): building the map calls no converter."""
        fn = self.funcs[qualname]
        inside = [e.refs for e in self.entries if e.file == fn.file and fn.start <= e.start <= fn.end]
        return fn.refs.difference(*inside)


@functools.lru_cache(maxsize=32)
def _file_index(path: str, text: str, map_namespace) -> "PyIndex | None":
    """One file's functions, classes and map entries, built once: frontends share files, revisions share texts."""
    part = PyIndex()
    return part if part._index(path, text, map_namespace) else None


@functools.lru_cache(maxsize=32)
def _parse(text: str) -> ast.Module | None:
    """Parsed once per text: the same file serves several frontends and, when unchanged, both revisions."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _start(node) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _base_name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", ast.unparse(node))


def _convert_maps(tree: ast.Module):
    """(owner class, dict node) for dicts that are convert maps: returned by a function whose name mentions
    ``convert_map`` or assigned to a name/attribute ``convert_map``; small dicts (< 3 entries) are not tables."""
    def visit(node, owner):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from visit(child, child.name)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if "convert_map" in child.name:
                    for sub in ast.walk(child):
                        if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Dict):
                            yield owner, sub.value
                for sub in ast.walk(child):
                    if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Dict) and any(
                            (getattr(t, "attr", None) or getattr(t, "id", None)) == "convert_map" for t in sub.targets):
                        yield owner, sub.value
                # nested classes/functions are covered by ast.walk above
            elif isinstance(child, ast.Assign) and isinstance(child.value, ast.Dict) and any(
                    getattr(t, "id", None) == "convert_map" for t in child.targets):
                yield owner, child.value
    for owner, d in visit(tree, None):
        if len(d.keys) >= 3:
            yield owner, d
