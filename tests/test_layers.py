"""dlci's declared layers hold (pyproject.toml ``[tool.importlinter]``), and no module imports itself back.

Both read grimp's import graph (import-linter's), which counts every import statement, those inside functions too.
"""
from __future__ import annotations

from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp")  # the dev extra: import-linter and its graph
pytest.importorskip("importlinter.cli")

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def test_the_import_contracts_hold():
    """The order of dlci's top-level packages and modules, the siblings that must stay independent, and no cycle
    between the modules of any package: import-linter's report says what breaks which. In a process of its own:
    its command line closes the streams it wrote to, which in pytest's process are pytest's."""
    import subprocess
    import sys
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--config", str(PYPROJECT), "--no-cache"], capture_output=True, text=True,
                          cwd=str(PYPROJECT.parent), timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_no_module_imports_itself_back():
    """No import cycle, counting imports inside functions and the parent packages Python runs first: ``import
    dlci.a.b`` executes ``dlci/a/__init__.py`` too, an edge grimp does not record (nor import-linter's contracts
    see), added here. Each import on a cycle is named with the way back."""
    graph = grimp.build_graph("dlci", cache_dir=None)
    for importer in list(graph.modules):
        for imported in graph.find_modules_directly_imported_by(importer):
            parts = imported.split(".")
            for k in range(1, len(parts)):
                parent = ".".join(parts[:k])
                if not (importer + ".").startswith(parent + "."):  # its own packages already run
                    graph.add_import(importer=importer, imported=parent)
    back = [f"{a} -> {b}, and back: {' -> '.join(graph.find_shortest_chain(importer=b, imported=a))}"
            for a in sorted(graph.modules) for b in sorted(graph.find_modules_directly_imported_by(a))
            if a != b and graph.chain_exists(importer=b, imported=a)]
    assert not back, "import cycles:\n" + "\n".join(back)
