"""NaN/Inf search (GRIST's idea): gradients of the framework itself push the operand of a vulnerable operation
toward its invalid values.

- :func:`load_program` / :func:`search`: a ``FILE:FUNCTION`` program (PyTorch or TensorFlow) is run under
  interception, its random draws become the search variables, and the first NaN/Inf-producing operation is reported
  with its source line and the failure-inducing values (``dlci nan``: :mod:`dlci.nan.command`).
- :func:`boundary_instances`: operator instances moved to the edge of their operator's domain, for the compiler
  campaign (:mod:`dlci.nan.operators`).
- :mod:`dlci.nan.table`: the vulnerable-operation table (data), with OpInfo's domains folded in.
"""
from __future__ import annotations

from dlci.models.program import Program, ProgramError, load_program
from dlci.nan.search import SearchResult, search


def boundary_instances(instances, *, budget, seed=0):
    from dlci.nan.operators import boundary_instances as impl
    return impl(instances, budget=budget, seed=seed)


__all__ = ["Program", "ProgramError", "SearchResult", "boundary_instances", "load_program", "search"]
