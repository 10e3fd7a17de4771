"""OpenVINO's usage telemetry, off in dlci's processes. Its converter sends a usage event for every conversion and
waits on the network for it unless it runs in CI. This turns on openvino_telemetry's own CI switch rather than
setting CI, which torch reads too. dlci's workers convert thousands of models: with it on, openvino.pytorch ran 80
valid tests a minute one test per model on this machine, 960-1,178 with it off (benchmarks/throughput.py, three
runs); a reproducer of an OpenVINO finding ran 6.5 s instead of 3.4 s.

Imports nothing of dlci: the warm interpreters that check reproducers (dlci.findings.warm) run this file by path.
Running it (or calling :func:`telemetry_off`) before the first conversion is what counts: the telemetry is a
singleton that decides once per process. Idempotent; nothing changes where the package is absent or differs.
"""


def telemetry_off() -> None:
    try:
        from openvino_telemetry.utils.opt_in_checker import OptInChecker
    except ImportError:
        return
    if callable(getattr(OptInChecker, "_run_in_ci", None)):
        OptInChecker._run_in_ci = staticmethod(lambda: True)


if __name__ == "__main__":
    telemetry_off()
