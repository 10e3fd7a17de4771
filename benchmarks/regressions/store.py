"""The cases' upstream test files, each distinct one stored once (content-addressed).

    python benchmarks/regressions/store.py CASE DEST      # write the case's test files into DEST (as groundtruth does)
    python benchmarks/regressions/store.py --stats        # files and lines stored, and as materialised

A case's test files are upstream/<case>__<module>.py as the extraction tools write them (extract_tests.py,
extract_opinfo_tests.py, screen.py): a header of comment lines naming the upstream source by commit URL, its licence
and the renames applied, then the extracted module. The header names the case's commit, and the OpInfo harness modules
import their sibling files as `<case>__ops_test_common` etc., so the same upstream module differs between cases only
there. They are stored as:

- upstream/manifest.json: for each case id, its files in name order: `name` (<case>__<module>.py), `header` (its
  lines), `body` (the file under upstream/files/ holding the rest) and `sha256` (of the whole file as materialised);
- upstream/files/<module>__<sha256 of the body, 16 hex>.py: the module text with the case's own prefix `<case>__`
  written DLCI_CASE__ (so it stays importable Python), one file per distinct body, shared by the cases that use it.

Materialising is header + body with DLCI_CASE__ back to `<case>__`; the result is checked against `sha256`, so a
materialised file is byte for byte the file the tool wrote (the ground-truth cache key hashes these bytes).
verify.py re-extracts them from the pinned upstream commits and compares with `sha256`.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "upstream"
FILES = UPSTREAM / "files"
MANIFEST = UPSTREAM / "manifest.json"
PLACEHOLDER = "DLCI_CASE__"
# the lines the extraction tools put before the extracted module (extract_tests.render, extract_opinfo_tests.header,
# screen.HARNESS_NOTE)
HEADER_PREFIXES = ("# flake8: noqa", "# pylint: skip-file", "# ---- from ", "# (", "# dlci screen: ",
                   "# Renames for the installed release:", "# verify_model below is dlci's numerical replacement")
ABOUT = ("The upstream test files of cases.yaml, stored once per distinct body: see benchmarks/regressions/store.py "
         "(materialise) and verify.py (re-extract from the pinned commits and compare sha256).")
# a tag an extraction tool reads besides the cases' commits (extract_opinfo_tests.py, screen.RELEASE_TESTS), pinned
PINS = {"microsoft/onnxscript": {"v0.7.1": "386769d2c53c414de7da1a86d9d50e067a60af04"}}


class StoreError(Exception):
    pass


def stem(case_id: str) -> str:
    return case_id.replace("-", "_")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load() -> dict:
    if not MANIFEST.exists():
        return {"about": ABOUT, "placeholder": PLACEHOLDER, "pins": PINS, "cases": {}}
    return json.loads(MANIFEST.read_text())


def save(manifest: dict) -> None:
    manifest["cases"] = dict(sorted(manifest["cases"].items()))
    MANIFEST.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


def split(case_id: str, name: str, text: str) -> tuple[list[str], str, str]:
    """(header lines, body with the case prefix written DLCI_CASE__, body file name)"""
    lines = text.splitlines(keepends=True)
    n = 0
    while n < len(lines) and lines[n].startswith(HEADER_PREFIXES) and lines[n].endswith("\n"):
        n += 1
    body = "".join(lines[n:])
    if PLACEHOLDER in body:
        raise StoreError(f"{name}: the text holds {PLACEHOLDER} itself")
    body = body.replace(f"{stem(case_id)}__", PLACEHOLDER)
    module = name.split("__", 1)[1].removesuffix(".py") if "__" in name else Path(name).stem
    return [l[:-1] for l in lines[:n]], body, f"{module}__{sha256(body.encode())[:16]}.py"


def join(case_id: str, header: list[str], body: str) -> str:
    return "".join(l + "\n" for l in header) + body.replace(PLACEHOLDER, f"{stem(case_id)}__")


def entries(case_id: str, manifest: dict | None = None) -> list[dict]:
    return (manifest or load())["cases"].get(case_id, [])


def files(case_id: str, manifest: dict | None = None) -> list[tuple[str, bytes]]:
    """[(name, content)] of the case's test files, in name order, each checked against its recorded sha256"""
    out = []
    for e in entries(case_id, manifest):
        path = FILES / e["body"]
        if not path.is_file():
            raise StoreError(f"{case_id}: {e['name']}: upstream/files/{e['body']} is missing")
        data = join(case_id, e["header"], path.read_text()).encode()
        if sha256(data) != e["sha256"]:
            raise StoreError(f"{case_id}: {e['name']} materialises to sha256 {sha256(data)[:16]}, "
                             f"the manifest records {e['sha256'][:16]}")
        out.append((e["name"], data))
    return out


def materialise(case_id: str, dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data in files(case_id):
        (dest / name).write_bytes(data)
        out.append(dest / name)
    return out


def put(case_id: str, new: dict[str, str]) -> None:
    """Store the given files of a case ({name: text}, as a tool wrote them), replacing those of the same names, and
    drop the bodies no case uses any more."""
    manifest = load()
    have = {e["name"]: e for e in manifest["cases"].get(case_id, [])}
    for name, text in new.items():
        if not name.startswith(f"{stem(case_id)}__"):
            raise StoreError(f"{name} is not a file of {case_id} (<case>__<module>.py)")
        header, body, fname = split(case_id, name, text)
        if join(case_id, header, body) != text:
            raise StoreError(f"{name} does not round-trip through the store")
        path = FILES / fname
        if path.exists() and path.read_text() != body:
            raise StoreError(f"upstream/files/{fname}: another body with the same hash prefix")
        FILES.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        have[name] = {"name": name, "header": header, "body": fname, "sha256": sha256(text.encode())}
    manifest["cases"][case_id] = [have[n] for n in sorted(have)]
    save(manifest)
    gc(manifest)


def gc(manifest: dict) -> list[str]:
    used = {e["body"] for es in manifest["cases"].values() for e in es}
    gone = []
    for path in sorted(FILES.glob("*.py")):
        if path.name not in used:
            path.unlink()
            gone.append(path.name)
    return gone


def stats(manifest: dict | None = None) -> dict:
    manifest = manifest or load()
    bodies = sorted(FILES.glob("*.py"))
    mat = [data for cid in manifest["cases"] for _, data in files(cid, manifest)]
    return {"cases": len(manifest["cases"]), "files_materialised": len(mat),
            "lines_materialised": sum(d.count(b"\n") for d in mat),
            "bodies_stored": len(bodies), "body_lines": sum(p.read_text().count("\n") for p in bodies),
            "manifest_lines": MANIFEST.read_text().count("\n")}


def main():
    if sys.argv[1:] == ["--stats"]:
        print(json.dumps(stats(), indent=1))
        return
    if len(sys.argv) != 3 or sys.argv[1].startswith("-"):
        raise SystemExit(__doc__.split("\n\n")[1])
    if sys.argv[1] not in load()["cases"]:
        raise SystemExit(f"{sys.argv[1]}: no upstream test files stored")
    for path in materialise(sys.argv[1], Path(sys.argv[2])):
        print(path)


if __name__ == "__main__":
    main()
