"""Write the upstream test files of the onnxscript cases whose test is torchlib's OpInfo harness (store.py runs this).

    python benchmarks/regressions/extract_opinfo_tests.py [--git-dir /path/to/onnxscript.git] [CASE ...]

A torchlib fix is usually tested by a TorchLibOpInfo entry of tests/function_libs/torch_lib/ops_test_data.py (and
sometimes an OpInfo of extra_opinfo.py) that ops_test.py runs: each OpInfo sample goes through the torchlib function,
the ONNX graph runs on ONNX Runtime and the outputs are compared with PyTorch. For each case of cases.yaml whose
upstream_test item lists `opinfo_entries`, this writes upstream/<case>__{ops_test,ops_test_common,ops_test_data}.py
(+ extra_opinfo.py when an entry uses one of its OpInfos): those modules read *at the fix commit*, with
TESTED_TORCHLIB_OPS (and extra_opinfo's OP_DB) restricted to the listed entries, the imports of tests.* pointed at the
sibling files, and the adaptations to the installed release listed in each file's header (an `expecttest` stub,
dtype_op_schema_compatible as in the release's own tests, TestFunctionValidity dropped: it needs `parameterized`).
The item's `edits` apply to ops_test_data.py (extract_tests.apply_edits). The upstream files are MIT, Microsoft
Corporation; the tree keeps none of them: write_case() writes loose files into OUT (store.py's extraction at run time,
screen.py's candidates) and main() records their names and sha256 in materialise.yaml (store.put). --git-dir defaults to
the upstream cache's clone (materialise.py).
"""
from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import materialise  # noqa: E402
import store  # noqa: E402

OUT = None   # the folder write_case() writes into (main() and store.py set a temporary one)
GIT = None   # --git-dir
D = "tests/function_libs/torch_lib"

SHIM = '''\
# dlci benchmark: torch.testing._internal imports `expecttest` (a PyTorch test-only dependency, not installed): a stub
import sys as _dlci_sys, types as _dlci_types, unittest as _dlci_unittest
if "expecttest" not in _dlci_sys.modules:
    _dlci_stub = _dlci_types.ModuleType("expecttest")
    _dlci_stub.TestCase = _dlci_unittest.TestCase
    _dlci_sys.modules["expecttest"] = _dlci_stub
'''


def with_shim(t):
    fut = "from __future__ import annotations\n"
    if fut in t:
        return t.replace(fut, fut + SHIM, 1)
    return SHIM + t


def show(commit, path):
    return subprocess.run(["git", "--git-dir", GIT, "show", f"{commit}:{path}"], capture_output=True, text=True,
                          check=True).stdout


def seg(src_lines, node):
    start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
    return "".join(src_lines[start:node.end_lineno])


def root_name(expr):
    """first positional string arg of the innermost TorchLibOpInfo(...) call of a chained expression"""
    while isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Name) and f.id == "TorchLibOpInfo":
            a = expr.args[0]
            return a.value if isinstance(a, ast.Constant) else None
        if isinstance(f, ast.Attribute):
            expr = f.value
        else:
            return None
    return None


def filter_data(src: str, names: set[str]) -> tuple[str, list[str]]:
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    out = []
    kept = []
    prev_end = 0
    # keep the module docstring/comments before the first node as is
    for node in tree.body:
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        gap = "".join(lines[prev_end:start])
        prev_end = node.end_lineno
        text = "".join(lines[start:node.end_lineno])
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == "TESTED_TORCHLIB_OPS":
                elts = node.value.elts
                pieces = []
                for e in elts:
                    if root_name(e) in names:
                        kept.append(root_name(e))
                        # the element's own source, with its leading comment lines
                        s = e.lineno - 1
                        while s > 0 and lines[s - 1].strip().startswith("#"):
                            s -= 1
                        pieces.append("".join(lines[s:e.lineno - 1]) + "    " +
                                      ast.get_source_segment(src, e, padded=False) + ",\n")
                head = "".join(lines[start:node.value.lineno - 1]) + lines[node.value.lineno - 1][
                    :node.value.col_offset] + "(\n"
                text = head + "".join(pieces) + ")\n"
                out.append(gap + text)
                continue
            if isinstance(target, ast.Name) and target.id == "PRIMS_OPS_WITH_OP_INFO":
                continue
        if isinstance(node, ast.For) and "duplicate_opinfo_for_prims" in text:
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            fn = ast.get_source_segment(src, node.value.func)
            if fn.endswith("duplicate_opinfo_for_prims"):
                continue
            if fn.endswith("duplicate_opinfo"):
                consts = {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
                if not (consts & names):
                    continue
        out.append(gap + text)
    missing = names - set(kept)
    if missing:
        raise SystemExit(f"entries not found: {missing}")
    return "".join(out), kept


def filter_extra(src: str, names: set[str]) -> str:
    """extra_opinfo.py with OP_DB restricted to the OpInfos named in names (the rest of the module kept)"""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    node = next(n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign)) and
                getattr(n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", "") == "OP_DB")
    pieces = []
    for e in node.value.elts:
        a = e.args[0] if isinstance(e, ast.Call) and e.args else None
        if isinstance(a, ast.Constant) and a.value in names:
            pieces.append("    " + ast.get_source_segment(src, e) + ",\n")
    if not pieces:
        raise SystemExit("no extra OpInfo kept")
    head = "".join(lines[node.lineno - 1:node.value.lineno - 1]) + lines[node.value.lineno - 1][:node.value.col_offset]
    new = head + "[\n" + "".join(pieces) + "]\n"
    old = "".join(lines[node.lineno - 1:node.end_lineno])
    # module-level functions the kept OpInfos do not use (transitively) are dropped
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    used, todo = set(), [e for e in node.value.elts if isinstance(e, ast.Call) and e.args and
                         isinstance(e.args[0], ast.Constant) and e.args[0].value in names]
    while todo:
        for sub in ast.walk(todo.pop()):
            if isinstance(sub, ast.Name) and sub.id in funcs and sub.id not in used:
                used.add(sub.id)
                todo.append(funcs[sub.id])
    out = src.replace(old, new)
    for name, fn in funcs.items():
        if name not in used:
            out = out.replace(seg(lines, fn), "", 1)
    return re.sub(r"\n{4,}", "\n\n\n", out)


def extra_names(commit: str) -> set[str]:
    """names of the OpInfos that extra_opinfo.py defines at commit"""
    tree = ast.parse(show(commit, f"{D}/extra_opinfo.py"))
    node = next(n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign)) and
                getattr(n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", "") == "OP_DB")
    return {e.args[0].value for e in node.value.elts
            if isinstance(e, ast.Call) and e.args and isinstance(e.args[0], ast.Constant)}


def write_case(case: str, commit: str, names: set[str], edits: list[dict]) -> None:
    """edits: the item's recorded `edits` (cases.yaml), applied to ops_test_data.py"""
    extra = bool(names & extra_names(commit))
    stem = case.replace("-", "_")
    url = f"https://github.com/microsoft/onnxscript/blob/{commit}/{D}"
    mod = {m: f"{stem}__{m}" for m in ("ops_test", "ops_test_common", "ops_test_data", "extra_opinfo")}

    def header(fname, what, renames):
        return (f"# flake8: noqa\n# pylint: skip-file\n# ---- from {url}/{fname}\n# (MIT, Microsoft Corporation): "
                f"{what}\n# Renames for the installed release: {'; '.join(renames) or 'none'}\n")

    def sub(text, old, new, renames, label=None, count_req=True):
        if old not in text:
            if count_req:
                raise SystemExit(f"{old!r} not found")
            return text
        renames.append(label or f"{old.strip()} -> {new.strip() or '(removed)'}")
        return text.replace(old, new)

    # ops_test_common.py
    r = []
    t = show(commit, f"{D}/ops_test_common.py")
    t = sub(t, "from tests.function_libs.torch_lib import error_reproduction\n",
            "error_reproduction = None  # only used with CREATE_REPRODUCTION_REPORT=1\n", r,
            "from tests.function_libs.torch_lib import error_reproduction -> (removed; used only with CREATE_REPRODUCTION_REPORT=1)")
    if "onnxscript.ir.passes.common" in t:   # onnxscript.ir is onnx_ir since onnxscript 0.3
        imp = re.search(r"^import onnxscript\.ir\.passes\.common.*\n", t, re.M).group(0)
        t = sub(t, imp, "import onnx_ir.passes.common.unused_removal\n", r)
        t = sub(t, "onnxscript.ir.passes.common.unused_removal.", "onnx_ir.passes.common.unused_removal.", r)
    # onnxscript 0.7 replaced OnnxFunction.op_schema (onnx OpSchema) with op_signature: the release's own version
    rel = show("v0.7.1", f"{D}/ops_test_common.py")
    rel_tree, rel_lines = ast.parse(rel), rel.splitlines(keepends=True)
    new_fn = next(seg(rel_lines, n) for n in rel_tree.body
                  if isinstance(n, ast.FunctionDef) and n.name == "dtype_op_schema_compatible")
    new_tab = next(seg(rel_lines, n) for n in rel_tree.body if isinstance(n, ast.Assign)
                   and getattr(n.targets[0], "id", "") == "_TORCH_DTYPE_TO_ONNX_TYPE")
    tree, lines = ast.parse(t), t.splitlines(keepends=True)
    old_fn = next(seg(lines, n) for n in tree.body
                  if isinstance(n, ast.FunctionDef) and n.name == "dtype_op_schema_compatible")
    t = t.replace(old_fn, new_tab + "\n\n" + new_fn)
    r.append("dtype_op_schema_compatible -> the installed release's version (onnxscript v0.7.1 tests: "
             "OnnxFunction.op_schema became op_signature)")
    (OUT / f"{mod['ops_test_common']}.py").write_text(
        header("ops_test_common.py", "the whole module (the OpInfo test harness's helpers).", r) + with_shim(t))

    # ops_test_data.py
    r = []
    t = show(commit, f"{D}/ops_test_data.py")
    t, kept = filter_data(t, names)
    has_complex = "complex=True" in t.split("TESTED_TORCHLIB_OPS", 1)[1].split("\n)\n", 1)[0]
    from extract_tests import apply_edits
    t, labels = apply_edits(case, t, edits, unique=False)
    r += labels
    if extra:
        new = f"import {mod['extra_opinfo']} as extra_opinfo\nimport {mod['ops_test_common']} as ops_test_common\n"
    else:
        new = f"import {mod['ops_test_common']} as ops_test_common\n"
        t = sub(t, "OPS_DB.extend(extra_opinfo.OP_DB)\n",
                "# OPS_DB.extend(extra_opinfo.OP_DB)  # dlci: the selected entries use PyTorch's own OpInfos\n", r,
                "OPS_DB.extend(extra_opinfo.OP_DB) -> (removed: the selected entries use PyTorch's OpInfos)")
    t = sub(t, "from tests.function_libs.torch_lib import extra_opinfo, ops_test_common\n", new, r,
            "from tests.function_libs.torch_lib import ... -> the case's sibling modules")
    what = (f"the module with TESTED_TORCHLIB_OPS restricted to the fix's entries ({', '.join(sorted(kept))}), "
            "the duplicate_opinfo calls they need, and the prims OpInfo duplication dropped.")
    (OUT / f"{mod['ops_test_data']}.py").write_text(header("ops_test_data.py", what, r) + with_shim(t))

    # extra_opinfo.py
    if extra:
        r = []
        t = filter_extra(show(commit, f"{D}/extra_opinfo.py"), names)
        from extract_tests import TORCHVISION_GUARD, TORCHVISION_LABEL
        t = sub(t, "import torchvision\n", TORCHVISION_GUARD, r, TORCHVISION_LABEL + "; the selected tests do not use it",
                count_req=False)
        (OUT / f"{mod['extra_opinfo']}.py").write_text(
            header("extra_opinfo.py", "the module with OP_DB restricted to the OpInfos of the fix's entries "
                   f"({', '.join(sorted(names))}) and the sample-input functions they use.", r) + with_shim(t))

    # ops_test.py
    r = []
    t = show(commit, f"{D}/ops_test.py")
    t = re.sub(r"from tests\.function_libs\.torch_lib import \(\n(    \w+,\n)+\)\n",
               f"import {mod['ops_test_common']} as ops_test_common\nimport {mod['ops_test_data']} as ops_test_data\n"
               f"error_reproduction = None  # only used with CREATE_REPRODUCTION_REPORT=1\n", t)
    r.append("from tests.function_libs.torch_lib import ... -> the case's sibling modules")
    tree = ast.parse(t)
    lines = t.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not has_complex:
            for m in node.body:
                if isinstance(m, ast.FunctionDef) and m.name == "test_complex_output_match_opinfo_":
                    t = t.replace(seg(lines, m), "")
                    if "complex" not in " ".join(r):
                        r.append("test_complex_output_match_opinfo_ -> (removed: the selected entries have no complex "
                                 "variant, and @ops refuses an empty op list)")
        if isinstance(node, ast.ClassDef) and node.name == "TestFunctionValidity":
            t = t.replace(seg(lines, node), "")
            r.append("class TestFunctionValidity -> (removed: needs the parameterized package, not installed; "
                     "it checks function protos, not outputs)")
    t = sub(t, "import parameterized\n", "", r, count_req=False)
    t = sub(t, "onnx_function.op_schema.type_constraints", "onnx_function.op_signature.params", r, count_req=False)
    t = sub(t, "onnx_function.op_schema", "onnx_function.op_signature", r, count_req=False)
    (OUT / f"{mod['ops_test']}.py").write_text(
        header("ops_test.py", "the whole module (TestOutputConsistency*: each selected OpInfo's samples through the "
               "torchlib function, compared with PyTorch).", r) + with_shim(t))
    print(case, "entries:", ", ".join(kept), file=sys.stderr)


def main():
    global GIT, OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", help="default: the upstream cache's clone (materialise.py)")
    ap.add_argument("--upstream", help="the upstream cache folder (materialise.py)")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    materialise.set_root(args.upstream)
    try:
        GIT = args.git_dir or str(materialise.git_dir("microsoft/onnxscript"))
    except materialise.UpstreamMissing as e:
        raise SystemExit(str(e))
    for case in yaml.safe_load((HERE / "cases.yaml").read_text())["cases"]:
        if args.cases and case["id"] not in args.cases:
            continue
        for item in case.get("upstream_test") or []:
            if item.get("opinfo_entries"):
                with tempfile.TemporaryDirectory(prefix="opinfo-") as tmp:
                    OUT = Path(tmp)
                    write_case(case["id"], case["commit"], set(item["opinfo_entries"]), item.get("edits", []))
                    store.put(case["id"], {f.name: f.read_text() for f in sorted(OUT.glob("*.py"))})


if __name__ == "__main__":
    main()
