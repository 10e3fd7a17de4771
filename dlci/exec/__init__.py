"""Execution engine: sandboxed long-lived workers that turn crashes, hangs and OOMs into results.

``Engine(workers, timeout, memory_mb, warm_imports, env, log_dir).run(jobs, on_result, deadline=...)``
streams one ``Outcome.to_dict()`` per job to ``on_result`` as jobs complete and returns a ``RunInfo``.
``run_isolated(job, timeout, memory_mb)`` runs one job in one fresh process.
"""
from __future__ import annotations

__all__ = ["Job", "Engine", "RunInfo", "run_isolated", "worker_env", "WorkerStartError"]


def __getattr__(name):
    # lazy, so that ``python -m dlci.exec.worker`` does not pay for the engine's imports
    if name in __all__:
        from dlci.exec import engine
        return getattr(engine, name)
    raise AttributeError(name)
