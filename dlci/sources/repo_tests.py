"""``repo_tests``: the repository's own tests as test material for the converters a pull request touches.

Operator test material (OpInfo samples, ONNX node tests) writes each operator one way; a converter branch may need
another: a shape computed in the graph that the importer folds into a shape expression, an interpolation given by
scale factor, an index list holding None. The repository's frontend tests write models that way, and its OpInfo
extensions cover operators PyTorch's database does not. This source reads them, on the pull request's head:

1. **Where** (:data:`LAYOUTS`, by profile, plus ``.dlci.yml`` ``repo_tests.paths``): TVM's
   ``tests/python/relax/test_frontend_*.py``; onnxscript's ``tests/function_libs/torch_lib/extra_opinfo.py`` (its
   ``OP_DB``) with ``ops_test_data.py`` (which OpInfo tests which torchlib function).
2. **Which tests** (:func:`choose_tests`): an AST scan of each test function, the module-level code it names and its
   parametrisation: the torch functions, torch.nn classes, tensor methods, ONNX op types (``make_node("Resize")``)
   and ATen overloads it mentions, mapped to canonical operators and met with the touched ones; a test whose name
   holds a touched operator's or converter's name ranks first. At most ``max_tests``.
3. **Recording** (:func:`run_pytest`): the chosen tests run with pytest in a subprocess, in the head revision's
   environment, under :mod:`dlci.sources.repo_plugin`, which records what enters the frontend's entry points
   (``from_exported_program(ep)``, ``from_fx(gm, input_info)``, ``from_onnx(model)``). Whether a test passes does not
   matter: the numeric oracle judges what was recorded. A deadline skips the tests that would start late; the
   subprocess is killed at the budget.
   OpInfo extensions (:func:`draw_opinfo`): the repository's ``OP_DB`` entries of the touched operators are imported
   in a subprocess (the head's environment) and their samples drawn as the ``opinfo`` source draws PyTorch's.
4. **Instances** (:func:`record_instances`): an exported program becomes a ``torch_exported`` instance, an FX graph a
   ``torch_fx`` one (dlci.models.recorded), an ONNX model an ``onnx_model`` one with inputs drawn from its declared
   shapes (seeded); OpInfo samples are ``torch_fn`` instances. Each names the operator of the touched converter its
   model holds (the first node that is one), so the scan routes it to the targets that reach that converter; a
   multi-node ONNX model is localised to its culprit node when it fails. Every record is untrusted (the pull request's
   code wrote it): call recipes pass :func:`dlci.sources.check_call`, programs
   :func:`dlci.models.recorded.check_program` or ``check_fx``, and a record that fails is dropped, counted under
   ``untrusted``.
"""
from __future__ import annotations

import ast
import collections
import hashlib
import io
import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec
from dlci.profiles._tables import dotted
from dlci.sources import UntrustedCacheEntry, check_call
from dlci.sources._common import dist_version

SOURCE = "repo_tests"
MAX_TESTS = 24        # test functions run per scan
MAX_INSTANCES = 48    # instances kept per scan
PER_OP = 12           # instances kept per touched operator
PER_TEST = 8          # records kept per test function (a parametrised test records one model per case)
MAX_RECORDS = 400     # records read back (each is checked and rebuilt once here)


@dataclass(frozen=True)
class Entry:
    """A frontend entry point the plugin records: ``module.function`` takes ``takes`` (one of :data:`TAKES`) as its
    first argument; ``target``: the dlci target it is."""
    module: str
    function: str
    takes: str
    target: str


@dataclass(frozen=True)
class Layout:
    """Where a kind of repository keeps the tests of its converters."""
    tests: tuple[str, ...] = ()        # test files (globs, repository-relative) whose functions are run
    entries: tuple[Entry, ...] = ()
    opinfo: tuple[str, ...] = ()       # files defining an ``OP_DB`` list of OpInfos
    opinfo_map: tuple[str, ...] = ()   # files naming, per OpInfo, the converter function it tests


TVM_ENTRIES = (Entry("tvm.relax.frontend.torch", "from_exported_program", "exported_program",
                     "tvm.from_exported_program"),
               Entry("tvm.relax.frontend.torch", "from_fx", "fx", "tvm.from_fx"),
               Entry("tvm.relax.frontend.onnx", "from_onnx", "onnx", "tvm.from_onnx"))
LAYOUTS = {
    "tvm": Layout(tests=("tests/python/relax/test_frontend_*.py",), entries=TVM_ENTRIES),
    "onnxscript": Layout(tests=("tests/function_libs/torch_lib/e2e_ops_tests.py",),
                         entries=(Entry("torch.onnx", "export", "module", "torch.onnx"),),
                         opinfo=("tests/function_libs/torch_lib/extra_opinfo.py",),
                         opinfo_map=("tests/function_libs/torch_lib/ops_test_data.py",)),
}
TAKES = ("exported_program", "fx", "onnx", "module")  # as dlci.config.Config.REPO_TESTS_TAKES


@dataclass
class Settings:
    """``.dlci.yml`` ``repo_tests`` (policy: read from the base revision)."""
    share: float = 0.2                  # of the scan's budget; 0: off
    max_tests: int = MAX_TESTS
    paths: tuple[str, ...] = ()         # more test files (globs)
    entries: tuple[Entry, ...] = ()     # more entry points to record

    @classmethod
    def of(cls, value: dict | None) -> "Settings":
        value = value or {}
        entries = tuple(Entry(*spec.split(":", 1), takes, spec.replace(":", ".")) for spec, takes in
                        (value.get("entries") or {}).items())
        return cls(share=float(value.get("share", cls.share)), max_tests=int(value.get("max_tests", MAX_TESTS)),
                   paths=tuple(value.get("paths") or ()), entries=entries)


# -- what the pull request touched -------------------------------------------------------------------------------------

@dataclass
class Wanted:
    """The touched operators as the selection reads them."""
    canonical: frozenset[str]
    names: frozenset[str]            # operator and converter names, as a test's name may hold them
    targets: frozenset[str]
    converters: frozenset[str]       # converter function names (``aten_col2im``)
    by_converter: dict[str, str] = field(default_factory=dict)  # converter function -> its operator's op id

    @classmethod
    def of(cls, touches) -> "Wanted":
        from dlci import operators
        canon, names, targets, convs, by_conv = set(), set(), set(), set(), {}
        for t in touches:
            cs = operators.canonical(t.operator, t.namespace)
            canon |= cs
            targets |= set(t.targets)
            base = t.operator.split("::")[-1].split(".")[0].lower()
            if t.namespace == "torch.nn":
                base = t.operator.split(".")[-1].lower()
            names.add(base.strip("_"))
            conv = t.converter.split(".")[-1].split("<")[-1].strip(">").strip("_")
            if conv:
                names.add(conv.lower())
                convs.add(t.converter.split(".")[-1])
                if t.namespace == "aten":
                    by_conv.setdefault(t.converter.split(".")[-1], f"aten::{base}")
        return cls(frozenset(canon), frozenset(n for n in names if len(n) >= 3), frozenset(targets),
                   frozenset(convs), by_conv)

    def meets(self, op_id: str) -> frozenset[str]:
        from dlci import operators
        return operators.instance_ops(op_id) & self.canonical


# -- choosing the tests ------------------------------------------------------------------------------------------------

@dataclass
class Candidate:
    file: str       # repository-relative
    nodeid: str     # file::[Class::]function
    name: str
    line: int
    score: int
    ops: list[str]  # touched canonical operators its code names
    why: str


_TORCH_HEADS = ("torch", "F", "nn", "functional", "ops", "aten")
_NOT_TENSORS = ("self", "tvm", "R", "relax", "np", "T", "I")  # heads of dotted names that are no tensor's methods


_OP_TYPE = re.compile(r"[A-Z][A-Za-z0-9]*")


def _mentions(tree_nodes: Iterable[ast.AST], onnx_strings: bool = False) -> set[str]:
    """Instance op ids a piece of test code names: torch functions and ATen overloads (``aten::interpolate``),
    torch.nn classes (``nn::Upsample``), tensor methods called (``aten::view``), ONNX op types given to make_node
    (``onnx::Resize``); with ``onnx_strings`` (a file that builds ONNX nodes), every op-type-like string handed to a
    call or listed (``verify_unary("Relu", ...)``, a parametrize list of op types)."""
    out: set[str] = set()
    for root in tree_nodes:
        for node in ast.walk(root):
            if onnx_strings and isinstance(node, (ast.Call, ast.List, ast.Tuple)):
                values = node.args if isinstance(node, ast.Call) else node.elts
                out |= {f"onnx::{v.value}" for v in values if isinstance(v, ast.Constant)
                        and isinstance(v.value, str) and _OP_TYPE.fullmatch(v.value)}
            if isinstance(node, ast.Attribute):
                name = dotted(node)
                if name is None:
                    if isinstance(node.ctx, ast.Load):
                        out.add(f"aten::{node.attr}")  # a method of a computed value: x.view(...)
                    continue
                parts = name.split(".")
                if parts[0] in _TORCH_HEADS or "nn" in parts[:-1]:
                    last = parts[-1]
                    if parts[-2:-1] and parts[-2][:1].islower() and last in ("default", "vec", "Tensor", "Scalar",
                                                                             "int", "float", "out", "self"):
                        last = parts[-2]  # torch.ops.aten.upsample_nearest2d.vec
                    out.add(f"nn::{last}" if last[:1].isupper() else f"aten::{last}")
                elif isinstance(node.ctx, ast.Load) and len(parts) >= 2 and parts[0] not in _NOT_TENSORS:
                    out.add(f"aten::{parts[-1]}")  # a method of a local tensor
            elif isinstance(node, ast.Call):
                fname = dotted(node.func) or ""
                if fname.split(".")[-1] in ("make_node", "make_model_with_node", "Node") and node.args \
                        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    out.add(f"onnx::{node.args[0].value}")
                for kw in node.keywords:
                    if kw.arg == "op_type" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        out.add(f"onnx::{kw.value.value}")
    return out


def _module_defs(tree: ast.Module) -> dict[str, list[ast.AST]]:
    defs: dict[str, list[ast.AST]] = collections.defaultdict(list)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name].append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    defs[t.id].append(node)
    return defs


def _reached(fn: ast.AST, defs: dict[str, list[ast.AST]], depth: int = 3, limit: int = 60) -> list[ast.AST]:
    """The test function with the module-level definitions it names, and those they name (bounded)."""
    seen: set[str] = set()
    out = [fn]
    frontier = [fn]
    for _ in range(depth):
        nxt = []
        for node in frontier:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and sub.id in defs and sub.id not in seen and len(seen) < limit:
                    seen.add(sub.id)
                    nxt += defs[sub.id]
        out += nxt
        frontier = nxt
    return out


def _tests_of(tree: ast.Module) -> Iterable[tuple[str, ast.AST]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and "Test" in node.name:  # pytest's Test*, unittest's *Test
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name.startswith("test"):
                    yield f"{node.name}::{sub.name}", sub


def choose_tests(repo: Path, files: list[str], wanted: Wanted, max_tests: int) -> tuple[list[Candidate], dict]:
    """The test functions of ``files`` that reach the touched converters, best first (see the module doc)."""
    cache: dict[str, frozenset[str]] = {}

    def meets(op_id: str) -> frozenset[str]:
        if op_id not in cache:
            cache[op_id] = wanted.meets(op_id)
        return cache[op_id]
    found: list[Candidate] = []
    stats = {"files": len(files), "tests_seen": 0, "unparsable": 0}
    for rel in files:
        try:
            tree = ast.parse((repo / rel).read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError, OSError):
            stats["unparsable"] += 1
            continue
        defs = _module_defs(tree)
        builds_onnx = any(isinstance(n, ast.Attribute) and n.attr == "make_node" or isinstance(n, ast.Name)
                          and n.id == "make_node" for n in ast.walk(tree))
        for name, fn in _tests_of(tree):
            stats["tests_seen"] += 1
            code = _reached(fn, defs) + list(getattr(fn, "decorator_list", []))
            ops = sorted({c for op in _mentions(code, builds_onnx) for c in meets(op)})
            short = name.split("::")[-1].lower()
            by_name = sorted(n for n in wanted.names if n in short)
            if not ops and not by_name:
                continue
            score = (2 if ops else 0) + (1 if by_name else 0)
            named = ", ".join(ops[:6]) + (f" and {len(ops) - 6} more" if len(ops) > 6 else "")
            why = "; ".join(x for x in (f"names {', '.join(by_name)}" if by_name else "",
                                        f"calls {named}" if ops else "") if x)
            found.append(Candidate(rel, f"{rel}::{name}", name, fn.lineno, score, ops, why))
    found.sort(key=lambda c: (-c.score, len(c.ops) == 0, c.file, c.line))
    stats["matching"] = len(found)
    return found[:max_tests], stats


# words of a test file's name that say which frontend it tests (test_frontend_from_exported_program.py)
_FRONTEND_WORDS = ("_exported_program_", "_fx_", "_onnx_", "_tflite_", "_nn_", "_dynamo_", "_stablehlo_")


def _words(name: str) -> str:
    return f"_{name}_"


def test_files(repo: Path, layout: Layout, extra: Iterable[str], wanted: Wanted) -> list[str]:
    """The layout's test files (those of the frontends the touched converters are reached through, when their names
    say which) and the configured ones."""
    files = []
    touched = [_words(t.split(".")[-1].removeprefix("from_")) for t in wanted.targets]
    for pattern in layout.tests:
        for path in sorted(repo.glob(pattern)):
            stem = _words(path.stem.lower())
            named = [w for w in _FRONTEND_WORDS if w in stem]
            if named and not any(w in stem for w in touched if w):
                continue  # another frontend's tests
            files.append(path.relative_to(repo).as_posix())
    for pattern in extra:
        files += [p.relative_to(repo).as_posix() for p in sorted(repo.glob(pattern)) if p.suffix == ".py"]
    return list(dict.fromkeys(f for f in files if not any(part.startswith(".") for part in Path(f).parts)))


# -- running them ------------------------------------------------------------------------------------------------------

def run_pytest(repo: Path, nodeids: list[str], entries: Iterable[Entry], env: dict, seconds: float,
               prefix: str, per_test: int = PER_TEST, conftest: bool = True) -> dict:
    """The tests ``nodeids`` with pytest under the recording plugin, in the revision's environment ``env`` (its
    paths first, as dlci's workers), from an empty working directory; records at ``prefix``; ``conftest=False``
    leaves the repository's conftest.py files out. Returns what the run says: exit code, seconds, the output's
    tail."""
    from dlci.exec import cancel, interp
    from dlci.exec.engine import worker_env
    ini = prefix + ".ini"
    Path(ini).write_text("[pytest]\n")
    run_env = interp.env(worker_env(env))
    run_env.update({
        "DLCI_HARVEST_OUT": prefix, "DLCI_REPO_PER_TEST": str(per_test),
        "DLCI_REPO_ENTRIES": json.dumps([[e.module, e.function, e.takes, e.target] for e in entries]),
        "DLCI_REPO_DEADLINE": str(time.time() + max(1.0, seconds - 4.0)),
        "PYTHONDONTWRITEBYTECODE": "1",  # leave the checkout's folders untouched
    })
    cmd = interp.command("pytest", *[str(repo / n.split("::", 1)[0]) + "::" + n.split("::", 1)[1] for n in nodeids],
                         "-p", "dlci.sources.repo_plugin", "-p", "no:cacheprovider", "-q", "-c", ini,
                         f"--rootdir={repo}", f"--confcutdir={repo}", "-W", "ignore", "--tb=no", "-rN",
                         *(() if conftest else ("--noconftest",)))
    t0 = time.monotonic()
    try:
        proc = cancel.run(cmd, timeout=max(1.0, seconds), cwd=interp.neutral_dir(), env=run_env)
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, output = "timeout", (e.output or "") + (e.stderr or "")
    tail = [ln for ln in str(output).strip().splitlines() if ln.strip()][-8:]
    return {"returncode": rc, "seconds": round(time.monotonic() - t0, 2), "tail": tail}


def setup_broken(ran: dict) -> bool:
    """Whether a run's tests errored (pytest's "N errors" summary) rather than ran: a repository conftest.py
    fixture that does not work with the installed library (TVM's relax conftest of one year over another's
    PassContext) errors every test before its model is built"""
    return ran.get("returncode") not in (0, "timeout") and any(
        re.search(r"\b\d+ errors?\b", line) for line in ran.get("tail") or [])


def read_records(prefix: str) -> tuple[list[dict], dict]:
    """The plugin's records (each with its arrays) and its counters. Lines cut short by a killed run are dropped."""
    meta, blob_path = prefix + ".jsonl", prefix + ".bin"
    if not os.path.exists(meta):
        return [], {"skipped": {"no-records": 1}}
    blob = Path(blob_path).read_bytes() if os.path.exists(blob_path) else b""
    lines = Path(meta).read_text(encoding="utf-8", errors="replace").split("\n")
    records, stats = [], {}
    for line in lines[:-1][:MAX_RECORDS + 1000]:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        if "$stats" in rec:
            stats = rec["$stats"] if isinstance(rec["$stats"], dict) else {}
            continue
        try:
            arrays = {}
            for name, ref in (rec.get("arrays") or {}).items():
                start, n = int(ref["offset"]), int(ref["nbytes"])
                if start < 0 or n < 0 or start + n > len(blob):
                    raise EOFError
                arrays[str(name)] = np.load(io.BytesIO(blob[start:start + n]), allow_pickle=False)
        except (KeyError, TypeError, ValueError, EOFError, OSError):
            continue
        rec["arrays"] = arrays
        records.append(rec)
        if len(records) >= MAX_RECORDS:
            break
    return records, stats


# -- records to instances ----------------------------------------------------------------------------------------------

def _torch_version() -> str:
    return f"torch {dist_version('torch')}"


def _onnx_inputs(model, shape_dict: dict, seed: int) -> list[np.ndarray]:
    """Inputs of an ONNX model drawn from its declared types (seeded): the test's own shapes for the dims it gave,
    2 for the symbolic dims it did not."""
    import onnx
    from dlci.models import onnx_input_names
    from dlci.models.recorded import draw_inputs
    declared = {vi.name: vi.type.tensor_type for vi in model.graph.input}
    info = []
    for name in onnx_input_names(model):
        tt = declared[name]
        given = shape_dict.get(name)
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if isinstance(given, list) and len(given) == len(dims):
            dims = [g if isinstance(g, int) and g >= 0 else d for g, d in zip(given, dims)]
        dims = [d if d >= 0 else 2 for d in dims]
        info.append((dims, onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name))
    return draw_inputs(info, seed)


def _node_ops(inst: Instance) -> list[str]:
    """Instance op ids of the model's nodes, in graph order."""
    from dlci.models.recorded import call_targets
    kind = inst.call.get("kind")
    if kind == "onnx_model":
        from dlci.instance.recipe import op_id
        from dlci.models.onnx_io import load_onnx
        return [op_id(n) for n in load_onnx(inst.arrays).graph.node]
    if kind == "torch_exported":
        return [f"aten::{t.split('.')[0]}" for t in call_targets(inst)]
    out = []
    for t in call_targets(inst):
        if t.startswith("torch.nn.") and t.split(".")[-1][:1].isupper():
            out.append(f"nn::{t.split('.')[-1]}")
        elif t.startswith("torch.ops."):
            out.append(f"aten::{t.split('.')[3]}")
        else:
            out.append(f"aten::{t.split('.')[-1]}")
    return out


def _untrusted(inst: Instance) -> str | None:
    """Why a recorded instance cannot be used (its recipe names what is no operator, its program holds code, its
    ONNX model is not valid), or None. Read, not rebuilt: the workers rebuild it (a program that does not rebuild is
    an invalid test there)."""
    from dlci.models import recorded
    try:
        check_call(inst.call)
        kind = inst.call.get("kind")
        if kind == recorded.EXPORTED:
            recorded.program_json(inst)
        elif kind == recorded.FX:
            recorded.check_fx(inst.call)
        elif kind == "onnx_model":
            from dlci.models.onnx_io import load_onnx
            return _onnx_unusable(load_onnx(inst.arrays))
        else:
            return "unknown-kind"
    except (UntrustedCacheEntry, recorded.UntrustedProgram):
        return "untrusted"
    except Exception as e:  # noqa: BLE001 - a model onnx refuses
        return f"invalid:{type(e).__name__}"
    return None


# ONNX domains whose operators the reference (onnx.reference) knows
KNOWN_ONNX_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


def _onnx_unusable(model) -> str | None:
    """Why a recorded ONNX model cannot be a test, or None. The checker's verdict is not final: a repository's tests
    hand their frontend models the checker refuses, and the frontend and ONNX Runtime take them (TVM's ONNX tests
    declare opset 14 for every model, LayerNormalization of opset 17 among them). Such a model is kept when its
    tensors are all inline and every node is an operator of a known domain; whether the reference runs it is for
    the worker to find (a reference that does not is an invalid test, never a finding). External data is refused
    whatever the checker says: it is a file read."""
    import onnx
    try:
        onnx.checker.check_model(model)
        refused = None
    except onnx.checker.ValidationError as e:
        refused = f"invalid:{type(e).__name__}"
    graphs, tensors = [model.graph], []
    while graphs:
        g = graphs.pop()
        tensors += list(g.initializer)
        for node in g.node:
            if refused and (node.domain not in KNOWN_ONNX_DOMAINS or not onnx.defs.has(node.op_type, node.domain)):
                return refused
            for attr in node.attribute:
                tensors += [attr.t] if attr.HasField("t") else []
                tensors += list(attr.tensors)
                graphs += ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in tensors):
        return "external-data"
    return None


def record_instances(records: list[dict], wanted: Wanted, tests: dict[str, Candidate]) -> tuple[list[Instance], dict]:
    """Instances of the records whose model holds a touched operator (see the module doc), checked; with the
    counts of what was dropped and why."""
    from dlci.models.onnx_io import instance_from_model, load_onnx
    skipped: collections.Counter = collections.Counter()
    out: list[Instance] = []
    seen: set[str] = set()
    for rec in records:
        call = rec.get("call")
        if not isinstance(call, dict) or call.get("kind") not in ("torch_exported", "torch_fx", "onnx_model"):
            skipped["untrusted"] += 1
            continue
        test = str(rec.get("test") or "")
        origin_test = _relative_test(test, tests)
        seed = int(rec.get("seed") or 0) & 0x7FFFFFFF
        arrays = rec["arrays"]
        try:
            if call["kind"] == "onnx_model":
                model = load_onnx(arrays)
                shapes = call.get("shape_dict") if isinstance(call.get("shape_dict"), dict) else {}
                inputs = _onnx_inputs(model, shapes, seed)
                inst = instance_from_model(model, inputs, source=SOURCE, test=origin_test, seed=seed)
                inst.call.update({k: v for k, v in call.items() if k in ("options", "entry")})
                inst.params = {}
            else:
                n = sum(1 for k in arrays if k.startswith("in:"))
                inputs = [arrays[f"in:{i}"] for i in range(n)]
                inst = Instance(op="model::recorded", framework="torch", call=dict(call),
                                inputs=[TensorSpec.of(a) for a in inputs], params={},
                                origin=Origin(SOURCE, origin_test, _torch_version()), seed=seed,
                                arrays={k: v for k, v in arrays.items()})
        except Exception as e:  # noqa: BLE001 - a record that does not make an instance
            skipped[f"unreadable:{type(e).__name__}"] += 1
            continue
        why = _untrusted(inst)
        if why:
            skipped[why] += 1
            continue
        try:
            nodes = _node_ops(inst)
        except Exception:  # noqa: BLE001
            skipped["unreadable"] += 1
            continue
        culprit = next((op for op in nodes if wanted.meets(op)), None)
        if culprit is None:
            skipped["touches-nothing"] += 1
            continue
        inst.op = culprit
        if len(nodes) > 1 and inst.framework == "onnx":
            inst.call["localise"] = True  # a failure is named after the node that causes it (dlci.localise)
        inst.call["nodes"] = len(nodes)
        inst.id = inst.compute_id()
        key = _content_key(inst)
        if key in seen:
            skipped["duplicate"] += 1
            continue
        seen.add(key)
        out.append(inst)
    return out, dict(skipped)


def _relative_test(test: str, tests: dict[str, Candidate]) -> str:
    """The pytest id of a record's test, repository-relative (its parametrisation kept)."""
    for nodeid in tests:
        path, _, name = nodeid.partition("::")
        if test.endswith(path + "::" + name) or (path in test and ("::" + name) in test):
            rest = test.split("::" + name, 1)[1] if ("::" + name) in test else ""
            return f"{nodeid}{rest}"
    return test


def _content_key(inst: Instance) -> str:
    """Equal for the same model, inputs' shapes and settings (the values of random example inputs aside)."""
    h = hashlib.sha1(json.dumps([inst.op, inst.framework, {k: v for k, v in inst.call.items()},
                                 [s.shape for s in inst.inputs], [s.dtype for s in inst.inputs]],
                                sort_keys=True, default=str).encode())
    for key in sorted(inst.arrays):
        if key.startswith("in:"):
            continue
        a = np.require(inst.arrays[key], requirements="C")
        h.update(key.encode())
        h.update(a.tobytes())
    return h.hexdigest()


def capped(instances: list[Instance], wanted: Wanted, per_op: int = PER_OP, total: int = MAX_INSTANCES
           ) -> list[Instance]:
    """At most ``per_op`` instances per touched operator and ``total`` in all, in the order given (the best tests'
    first)."""
    count: collections.Counter = collections.Counter()
    kept = []
    for inst in instances:
        ops = sorted(wanted.meets(inst.op))
        key = ops[0] if ops else inst.op
        if count[key] >= per_op:
            continue
        count[key] += 1
        kept.append(inst)
        if len(kept) >= total:
            break
    return kept


# -- OpInfo extensions -------------------------------------------------------------------------------------------------

def mapped_opinfos(repo: Path, files: Iterable[str], converters: Iterable[str]) -> dict[str, str]:
    """OpInfo names that the repository's test data ties to the touched converter functions, with the function:
    ``TorchLibOpInfo("ops.aten.col2im", nn_ops.aten_col2im, ...)`` (any call whose first argument is a string and
    whose second names the function)."""
    wanted = set(converters)
    out: dict[str, str] = {}
    for rel in files:
        try:
            tree = ast.parse((repo / rel).read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                fn = (dotted(node.args[1]) or "").split(".")[-1]
                if fn in wanted:
                    out.setdefault(node.args[0].value, fn)
    return out


def draw_opinfo(repo: Path, files: list[str], names: dict[str, str], wanted: Wanted, env: dict, seconds: float,
                limit_per_op: int) -> tuple[list[Instance], dict]:
    """Samples of the repository's own OpInfos (``OP_DB`` of ``files``) for the touched operators or named in
    ``names`` (OpInfo name -> the converter function the test data ties it to), drawn in a subprocess in the
    revision's environment (dlci.sources.repo_opinfo), read back as a harvest cache is (every call recipe checked).
    A named OpInfo whose own operator is none of the touched ones is named after its converter's operator."""
    from dlci.exec import cancel, interp
    from dlci.exec.engine import worker_env
    from dlci.sources import read_cache
    with tempfile.TemporaryDirectory(prefix="dlci-repo-opinfo-") as td:
        spec = {"repo": str(repo), "files": files, "names": sorted(names), "ops": sorted(wanted.canonical),
                "limit": limit_per_op, "out": os.path.join(td, "samples")}
        Path(td, "spec.json").write_text(json.dumps(spec))
        t0 = time.monotonic()
        try:
            proc = cancel.run(interp.command("dlci.sources.repo_opinfo", os.path.join(td, "spec.json")),
                              timeout=max(1.0, seconds), cwd=interp.neutral_dir(), env=interp.env(worker_env(env)))
            rc, tail = proc.returncode, (proc.stdout + proc.stderr).strip().splitlines()[-6:]
        except subprocess.TimeoutExpired:
            rc, tail = "timeout", []
        stats = {"returncode": rc, "seconds": round(time.monotonic() - t0, 2), "tail": tail}
        meta, npz = Path(spec["out"] + ".jsonl"), Path(spec["out"] + ".npz")
        if not meta.exists():
            return [], stats
        try:
            instances, drawn = read_cache(meta, npz)
        except UntrustedCacheEntry:
            stats["untrusted"] = True
            return [], stats
        except Exception as e:  # noqa: BLE001 - a damaged file: nothing from it
            stats["unreadable"] = f"{type(e).__name__}: {str(e)[:200]}"
            return [], stats
    stats.update({k: v for k, v in drawn.items() if k in ("skipped", "opinfos", "instances")})
    kept = []
    for inst in instances:
        if inst.origin.source != SOURCE or inst.framework != "torch" or inst.call.get("kind") != "torch_fn":
            continue
        if not wanted.meets(inst.op):
            name = inst.origin.test.split(":", 1)[-1].split("[", 1)[0]
            op = wanted.by_converter.get(names.get(name, ""))
            if op is None:
                continue
            inst.op = op
            inst.id = inst.compute_id()
        kept.append(inst)
    return kept, stats
