"""Extract a fix's own upstream test (<case>__<module>.py); store.py runs this at run time, main() records hashes.

    python benchmarks/regressions/extract_tests.py [--git-dir /path/to/apache-tvm.git] [CASE ...]
    python benchmarks/regressions/extract_tests.py [--git-dir /path/to/onnxscript.git] [CASE ...]

Reads a git directory of the cases' upstream repository (default: its clone in the upstream cache, materialise.py;
cases of another repository are skipped). For each case of cases.yaml it reads the
upstream test file *at the fix commit* and keeps: the module's imports, its module-level assignments and helper
functions (everything that is not a test), and the case's test functions verbatim. The few API renames between the
fix's TVM and the installed release are applied as plain text substitutions and listed in the file's header (and in
cases.yaml `test_adaptation`). The upstream files are Apache-2.0 (c) the Apache Software Foundation; each output
names its source by commit URL. The tree keeps none of them: main() records each file's name and sha256 in
materialise.yaml (store.put), and store.py extracts them with render() whenever a case's tests are needed and checks
those hashes. A case's `edits` are line edits (`lines: [a, b]`, the sha256 of those lines and the `new` segments, in
materialise.py's edit language, against the extract after the renames) or `old`/`new` text replacements (renames).
"""
from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import materialise  # noqa: E402
import store  # noqa: E402

EDIT_LABEL = "case edit (see cases.yaml test_adaptation)"

# renames between the TVM of 2024-2025 and the installed 0.27 (text substitutions, applied in this order)
RENAMES = [
    ("tvm.nd.NDArray", "tvm.runtime.Tensor"),
    ("tvm.nd.array", "tvm.runtime.tensor"),
    (".struct_info", ".ty"),
    (".name_hint", ".name"),
    ("from tvm.script import tir as T", "from tvm.script import tirx as T"),
    ("@tvm.testing.requires_gpu\n", ""),
    # onnxscript's tests/common/testutils.TestBase is unittest.TestCase plus a `validate` helper these tests do not use
    ("from tests.common import testutils\n", ""),
    ("(testutils.TestBase)", "(unittest.TestCase)"),   # gone from tvm.testing; the CPU-only helper tests it marked run anyway
    ("from onnx import ModelProto, TensorProto, helper, mapping", "from onnx import ModelProto, TensorProto, helper"),
    ("onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type]", "helper.tensor_dtype_to_np_dtype(elem_type)"),
]

# `import torchvision` in an extracted test module, guarded: the selected tests do not use it, and an installed
# torchvision need not load (one built for CUDA over the CPU torch raises RuntimeError, not ImportError)
TORCHVISION_GUARD = "try:\n    import torchvision\nexcept Exception:  # noqa: BLE001\n    torchvision = None\n"
TORCHVISION_LABEL = "import torchvision -> guarded (any exception on import: absent, or built for another torch)"

# onnx.mapping was removed from onnx (1.17+): the helper functions that replaced it
REGEX_RENAMES = [
    (r"(?:onnx\.)?mapping\.TENSOR_TYPE_TO_NP_TYPE\[([^\]]+)\]", r"helper.tensor_dtype_to_np_dtype(\1)",
     "onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[x] -> helper.tensor_dtype_to_np_dtype(x)"),
    (r"(?:onnx\.)?mapping\.NP_TYPE_TO_TENSOR_TYPE\[([^\]]+)\]", r"helper.np_dtype_to_tensor_dtype(\1)",
     "onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[x] -> helper.np_dtype_to_tensor_dtype(x)"),
    # only tests not selected here use torchvision; it may be absent, or built for another torch (a CUDA wheel over
    # the CPU torch raises RuntimeError on import): any exception leaves it None
    (r"(?m)^import torchvision$", TORCHVISION_GUARD.rstrip("\n"), TORCHVISION_LABEL),
]


LICENSES = {"apache/tvm": "Apache-2.0, the Apache Software Foundation",
            "microsoft/onnxscript": "MIT, Microsoft Corporation"}


def test_file_name(case_id: str, upstream_file: str) -> str:
    """upstream/<case>__<upstream test module>.py (one per upstream test file the case uses)."""
    return f"{case_id.replace('-', '_')}__{Path(upstream_file).stem}.py"


def extract(source: str, tests: list[str]) -> str:
    """Imports, module-level assignments and helpers, and the selected tests ("test_x", or "Class.test_x" for a
    unittest class: the class keeps its other members but only the selected test methods)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    # test functions a selected test calls (test_extended_unary_ops calls test_hardtanh, ...) come along
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    tests = list(tests)
    todo = [t for t in tests if "." not in t]
    while todo:
        node = defs.get(todo.pop())
        for sub in ast.walk(node) if node else ():
            if isinstance(sub, ast.Name) and sub.id.startswith("test_") and sub.id in defs and sub.id not in tests:
                tests.append(sub.id)
                todo.append(sub.id)
    methods: dict[str, set[str]] = {}
    for t in tests:
        if "." in t:
            cls, meth = t.split(".", 1)
            methods.setdefault(cls, set()).add(meth)

    def text(node) -> str:
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        return "".join(lines[start:node.end_lineno])

    keep, found = [], set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)):
            keep.append(text(node))
        elif isinstance(node, ast.ClassDef) and node.name in methods:
            start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
            head = "".join(lines[start:node.body[0].lineno - 1])
            members = []
            for m in node.body:
                if isinstance(m, ast.FunctionDef) and m.name.startswith("test"):
                    if m.name not in methods[node.name]:
                        continue
                    found.add(f"{node.name}.{m.name}")
                members.append(text(m))
            keep.append(head + "\n".join(members))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            if node.name.startswith("test_") and node.name not in tests:
                continue
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                continue   # other test classes
            found.add(node.name)
            keep.append(text(node))
        # if __name__ == "__main__" and other statements are dropped
    missing = [t for t in tests if t not in found]
    if missing:
        raise SystemExit(f"tests not found: {missing}")
    return "\n\n".join(keep) + "\n"


def apply_edits(case_id: str, text: str, edits: list[dict], unique: bool = True) -> tuple[str, list[str]]:
    """a case's recorded `edits` (cases.yaml): the line edits (materialise.py's language: `lines: [a, b]`, `sha256` of
    those lines, `new` segments taken from the same text or literal) together against the text, then each
    `old`/`new` replacement in order (unique: `old` must occur once). Returns the text and a label per edit."""
    line_edits = [e for e in edits if "lines" in e]
    for e in line_edits:
        if "sha256" not in e or any("rev" in s for s in e.get("new", [])):
            raise SystemExit(f"{case_id}: a line edit of a test needs the sha256 of its lines and takes no upstream "
                             f"revision")
    labels = []
    if line_edits:
        try:
            text = "".join(materialise.apply(materialise.lines_of(text), line_edits))
        except materialise.MaterialiseError as e:
            raise SystemExit(f"{case_id}: edit: {e}") from None
        labels += [EDIT_LABEL] * len(line_edits)
    for edit in edits:
        if "lines" in edit:
            continue
        if unique and text.count(edit["old"]) != 1:
            raise SystemExit(f"{case_id}: edit target found {text.count(edit['old'])} times")
        if edit["old"] not in text:
            raise SystemExit(f"{edit['old']!r} not found")
        text = text.replace(edit["old"], edit["new"])
        labels.append(EDIT_LABEL if unique or "\n" in edit["old"] else
                      f"{edit['old']} -> {edit['new']} (case edit, see cases.yaml test_adaptation)")
    return text, labels


def renamed_extract(src: str, functions: list[str]) -> tuple[str, list[str]]:
    """extract() with RENAMES applied (the text a case's `edits` apply to), and the renames applied"""
    body = extract(src, functions)
    applied = []
    for old, new in RENAMES:
        if old in body:
            body = body.replace(old, new)
            applied.append(f"{old.strip()} -> {new.strip() or '(removed)'}")
    return body, applied


def render(case: dict, item: dict, src: str) -> str:
    """The upstream/ file of one upstream_test item, from its upstream test file's text at the fix commit: the
    extract, the renames, the item's recorded `edits`, the header naming the source and the renames applied."""
    body, applied = renamed_extract(src, item["functions"])
    body, labels = apply_edits(case["id"], body, item.get("edits", []))   # case-specific adaptations
    applied += labels
    for pattern, repl, label in REGEX_RENAMES:
        body, n = re.subn(pattern, repl, body)
        if n:
            applied.append(label)
    url = f"https://github.com/{case['repo']}/blob/{case['commit']}/{item['file']}"
    lic = LICENSES.get(case["repo"], "see the repository")
    header = (f"# ---- from {url}\n# ({lic}): imports, module-level "
              f"helpers and the test functions {', '.join(item['functions'])}.\n"
              f"# Renames for the installed release: {'; '.join(applied) or 'none'}\n")
    if item.get("numeric"):
        header += ("# verify_model below is dlci's numerical replacement (benchmarks/regressions/upstream/"
                   "_torch_numeric.py): the upstream one compares with a 2025 IRModule structurally.\n")
        body += f"\nfrom _torch_numeric import {item['numeric']} as verify_model  # noqa: E402,F811\n"
    return "# flake8: noqa\n# pylint: skip-file\n" + header + body


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", help="default: the upstream cache's clone (materialise.py)")
    ap.add_argument("--upstream", help="the upstream cache folder (materialise.py)")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    materialise.set_root(args.upstream)
    doc = yaml.safe_load((HERE / "cases.yaml").read_text())
    for case in doc["cases"]:
        if args.cases and case["id"] not in args.cases:
            continue
        gt = case.get("upstream_test")
        if not gt:
            continue
        try:
            git_dir = args.git_dir or str(materialise.git_dir(case["repo"]))
        except materialise.UpstreamMissing as e:
            raise SystemExit(str(e))
        if subprocess.run(["git", "--git-dir", git_dir, "cat-file", "-e", case["commit"]],
                          capture_output=True).returncode:
            print(f"{case['id']}: {case['commit'][:10]} is not in {git_dir} (another repository)", file=sys.stderr)
            continue
        for item in gt:
            if item.get("opinfo_entries"):   # torchlib's OpInfo harness: extract_opinfo_tests.py writes these
                continue
            src = subprocess.run(["git", "--git-dir", git_dir, "show", f"{case['commit']}:{item['file']}"],
                                 capture_output=True, text=True, check=True).stdout
            name = test_file_name(case["id"], item["file"])
            text = render(case, item, src)
            store.put(case["id"], {name: text})
            print(f"{name}: sha256 {store.sha256(text.encode())[:16]} recorded", len(text.encode()), "bytes",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
