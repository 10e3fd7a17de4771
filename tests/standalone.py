"""Running a reproducer where dlci cannot be imported (shared by the rules tests)."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig


def run_without_dlci(script, cwd) -> subprocess.CompletedProcess:
    """Run a script where dlci cannot be imported: no site processing (the editable install's finder is a .pth),
    the frameworks' site-packages on PYTHONPATH, another working directory."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DLCI_RULE_MODULES")}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    no_dlci = subprocess.run([sys.executable, "-S", "-c", "import dlci"], capture_output=True, env=env, cwd=cwd)
    assert no_dlci.returncode != 0, "dlci is importable: the check would prove nothing"
    return subprocess.run([sys.executable, "-S", str(script)], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)
