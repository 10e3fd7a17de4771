"""Settings for the whole test session."""
import os

# OpenVINO's converter sends usage telemetry from a forked process unless it runs in CI. A fork taken while one of
# pytest's threads holds a lock can deadlock in that child, and the interpreter then waits for it at exit forever
# (seen: a green run that never ended). Tests send no telemetry.
os.environ.setdefault("CI", "true")
