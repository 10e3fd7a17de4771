"""The program pass: a user's whole torch model (a ``torch_program`` instance, dlci.models.program) cut down to the
operator its failure is localised to.

The signature of a localised failure names the culprit's operator (dlci.localise); each node of the
program's FX graph with that operator is tried **alone**, fed with the float32 reference's values, as the
single-operator instance dlci.models.fx builds (a ``torch_fn`` or ``torch_module`` recipe, checked to compute what
the node computed). The first that fails the same way replaces the program: from then on the ordinary passes shrink
its shapes, simplify its values and name the parameters that matter, and its reproducer needs neither dlci nor the
user's file. A failure that needs several operators (its signature says "in a graph") keeps the whole program.
"""
from __future__ import annotations

from dlci.findings import LOCALISED_IN_GRAPH


def program_pass(s) -> None:
    """The pass of :func:`dlci.reduce.reduce_instance` for torch programs (``s`` is its search state)."""
    from dlci.models.fx import FxView
    from dlci.models.program import KIND
    inst = s.current
    if inst.call.get("kind") != KIND:
        return
    parts = s.signature.split("|")
    if len(parts) < 3 or parts[2].endswith(LOCALISED_IN_GRAPH):
        s.note("program: the failure needs several operators together: the whole program is kept")
        return
    view = FxView(inst)
    anchors = [k for k in range(len(view)) if view.op(k) == parts[2]]
    if not anchors:
        s.note(f"program: no node of operator {parts[2]} in the traced program")
        return
    options = [(view.label(k), view.alone(k)) for k in anchors]
    if all(c is None for _, c in options):
        s.note(f"program: no {parts[2]} node can be expressed alone")
        return
    hit = s.first(options)
    if hit is not None:
        s.accept("graph", f"the operator {hit[0]} alone, fed from the reference: {len(view)} -> 1 operators", hit[1])
