"""A user's whole model as one instance (``dlci test --model model.onnx [--inputs values.npz]``): a failure is then
cut down by graph delta debugging to the operators it needs (dlci.reduce.graph)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dlci.errors import UsageError
from dlci.instance import Instance


def model_instance(path: str, inputs_path: str | None, seed: int) -> Instance:
    """An ONNX model file as one instance: inputs from ``inputs_path`` (.npz keyed by graph input name) or drawn from
    the declared shapes and dtypes (seeded). Bad files, dynamic shapes without inputs: usage errors."""
    import onnx
    from dlci.reduce.edit import feed_names
    from dlci.reduce.graph import instance_from_model
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
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(dims).astype(dtype))
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 4, dims).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(dims) < 0.5)
        else:
            raise UsageError(f"--model {path}: input {name!r} of type {dtype} needs --inputs FILE.npz")
    # the model is named as a whole: the signature stays the same while the graph pass cuts it down
    stem = Path(path).stem.replace("::", "_") or "model"
    return instance_from_model(model, arrays, op=f"model::{stem}", source="model", test=str(path), seed=seed)
