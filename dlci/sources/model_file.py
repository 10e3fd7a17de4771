"""A user's whole model as one instance: an ONNX file (``dlci test --model model.onnx [--inputs values.npz]``) or a
PyTorch model (``--model FILE.py:FUNCTION``, FUNCTION returning the module in eval mode and a tuple of example
inputs, dlci.models.program). A failure is localised to the operator that causes it (dlci.localise: ONNX nodes, or
the torch calls of the module's FX graph), then cut down to it (dlci.reduce.graph, dlci.reduce.program)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dlci.errors import UsageError
from dlci.instance import Instance, Unencodable
from dlci.models.recorded import draw_inputs


def is_program(path: str) -> bool:
    """``FILE.py:FUNCTION`` (or a .py file named alone, which is then a usage error)."""
    return path.endswith(".py") or (":" in path and path.rsplit(":", 1)[0].endswith(".py"))


def program_model_instance(spec: str, inputs_path: str | None, seed: int) -> Instance:
    """A PyTorch model from ``FILE.py:FUNCTION``; what is wrong with it is a usage error."""
    from dlci.models.program import ProgramError, program_instance
    if inputs_path:
        raise UsageError(f"--inputs applies to ONNX models: {spec} returns its own example inputs")
    if not spec.rsplit(":", 1)[-1].isidentifier() or spec.endswith(".py"):
        raise UsageError(f"--model {spec}: a PyTorch model is given as FILE.py:FUNCTION (FUNCTION returns the module "
                         "in eval mode and a tuple of example inputs)")
    try:
        return program_instance(spec, seed=seed)
    except ProgramError as e:
        raise UsageError(f"--model {e}") from None


def model_instance(path: str, inputs_path: str | None, seed: int) -> Instance:
    """An ONNX model file as one instance: inputs from ``inputs_path`` (.npz keyed by graph input name) or drawn from
    the declared shapes and dtypes (seeded); a ``FILE.py:FUNCTION`` PyTorch model (:func:`program_model_instance`).
    Bad files, dynamic shapes without inputs: usage errors. A failure is localised to its operator."""
    if is_program(path):
        return program_model_instance(path, inputs_path, seed)
    import onnx
    from dlci.models.onnx_io import feed_names, instance_from_model
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as e:
        raise UsageError(f"--model {path}: not a valid ONNX model ({type(e).__name__}: {str(e)[:300]})") from None
    declared = {i.name: i.type.tensor_type for i in model.graph.input}
    given = {}
    if inputs_path:
        try:
            given = dict(np.load(inputs_path))
        except Exception as e:
            raise UsageError(f"--inputs {inputs_path}: cannot read it as .npz ({e})") from None
    rng = np.random.default_rng(seed)
    arrays = []
    for name in feed_names(model):
        if name in given:
            arrays.append(given[name])
            continue
        tt = declared[name]
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if any(d is None for d in dims):
            raise UsageError(f"--model {path}: input {name!r} has a dynamic shape; give its values with --inputs "
                             "FILE.npz")
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        try:
            arrays += draw_inputs([(dims, str(dtype))], seed, rng)
        except Unencodable:
            raise UsageError(f"--model {path}: input {name!r} of type {dtype} needs --inputs FILE.npz") from None
    # named as a whole until a failure is localised to the operator that causes it (dlci.localise)
    stem = Path(path).stem.replace("::", "_") or "model"
    inst = instance_from_model(model, arrays, op=f"model::{stem}", source="model", test=str(path), seed=seed)
    inst.call["localise"] = len(model.graph.node) > 1
    inst.id = inst.compute_id()
    return inst
