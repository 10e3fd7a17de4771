"""Reproducer checks from warm interpreters (dlci.findings.warm): the same verdicts as a fresh interpreter, only a
"reproduces" is taken from a warm check, and a reproducer that hangs costs its timeout, not the pool."""
from __future__ import annotations

import os
import time

from dlci.findings.repro import check_repro, scrubbed_env
from dlci.findings.warm import WarmPool

LIGHT = ("numpy",)  # what these scripts import (the real reproducers' checks preload torch and the targets)
REPRODUCES = """import os, sys
import numpy as np
print("REPRODUCED" if os.environ.get("DLCI_WARM_TEST") == "broken" else "fixed")
sys.exit(1 if os.environ.get("DLCI_WARM_TEST") == "broken" else 0)
"""


def test_a_warm_check_gives_the_fresh_verdict_in_the_pools_environment(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text(REPRODUCES)
    with WarmPool(scrubbed_env({"DLCI_WARM_TEST": "broken"}), 1, LIGHT) as pool:
        assert check_repro(script, env={"DLCI_WARM_TEST": "broken"}, warm=pool) is True
        assert "warm interpreter" in script.with_suffix(".log").read_text()
        t0 = time.monotonic()
        for _ in range(3):  # later checks are children of the same warm interpreter: no imports again
            assert check_repro(script, env={"DLCI_WARM_TEST": "broken"}, warm=pool) is True
        assert time.monotonic() - t0 < 10
    with WarmPool(scrubbed_env({"DLCI_WARM_TEST": "fixed"}), 1, LIGHT) as pool:
        # a warm "does not reproduce" is not taken: a fresh interpreter decides (and its log says so)
        assert check_repro(script, env={"DLCI_WARM_TEST": "fixed"}, warm=pool) is False
        log = script.with_suffix(".log").read_text()
        assert log.startswith("exit 0") and "warm" not in log


def test_the_script_runs_as_main_in_its_folder_with_its_own_argv(tmp_path):
    (tmp_path / "helper_data.txt").write_text("here")
    script = tmp_path / "repro.py"
    script.write_text("import os, sys\nok = __name__ == '__main__' and open('helper_data.txt').read() == 'here' "
                      "and sys.argv == [os.path.abspath(__file__)]\nprint('REPRODUCED' if ok else 'no')\n"
                      "sys.exit(1 if ok else 0)\n")
    with WarmPool(scrubbed_env(), 1, LIGHT) as pool:
        got = pool.run(script, 60)
    assert got is not None and got.returncode == 1 and "REPRODUCED" in got.stdout, got


def test_a_hanging_reproducer_costs_its_timeout_and_the_pool_starts_another_interpreter(tmp_path):
    hang, ok = tmp_path / "hang.py", tmp_path / "ok.py"
    hang.write_text("import time\ntime.sleep(600)\n")
    ok.write_text("import sys\nprint('REPRODUCED')\nsys.exit(1)\n")
    with WarmPool(scrubbed_env(), 1, LIGHT) as pool:
        t0 = time.monotonic()
        assert pool.run(hang, 3) is None
        assert time.monotonic() - t0 < 60
        got = pool.run(ok, 60)
        assert got is not None and got.returncode == 1
        pids = [i.proc.pid for i in pool._all]
    assert len(pids) == 2
    for pid in pids:  # closed with the pool: no warm interpreter outlives the checks
        try:
            os.kill(pid, 0)
            alive = os.path.exists(f"/proc/{pid}") and "Z" not in open(f"/proc/{pid}/stat").read().split()[2]
        except ProcessLookupError:
            alive = False
        assert not alive


def test_a_warm_check_sends_no_openvino_telemetry(tmp_path):
    """The warm interpreter turns OpenVINO's usage telemetry off before anything (dlci/targets/_openvino_quiet.py,
    run by path: the check's environment need not import dlci): an OpenVINO reproducer does not wait on the
    network for a usage event. CI unset and a fresh HOME: OpenVINO alone would send."""
    import pytest
    pytest.importorskip("openvino_telemetry")
    pytest.importorskip("openvino")
    script = tmp_path / "repro.py"
    script.write_text("import sys\nfrom openvino.tools.ovc.telemetry_utils import init_ovc_telemetry\n"
                      "print('consent', init_ovc_telemetry().consent)\nsys.exit(0 if init_ovc_telemetry().consent "
                      "else 1)\n")
    env = {k: v for k, v in scrubbed_env({"HOME": str(tmp_path)}).items() if k not in ("CI", "PYTHONPATH")}
    with WarmPool(env, 1, LIGHT) as pool:
        got = pool.run(script, 60)
    assert got is not None and got.returncode == 1 and "consent False" in got.stdout, got
