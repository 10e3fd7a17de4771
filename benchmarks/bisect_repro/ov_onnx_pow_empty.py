"""OpenVINO ONNX frontend: torch.pow of two empty float32 tensors, exported with torch.onnx (dynamo), converted
and run on CPU, raises RuntimeError "vector::_M_range_check" at inference (found by dlci in 2026.4.1; `dlci bisect`:
introduced in 2026.0.0, 2025.4.1 good). dlci's own reproducer: exits 1 while the bug reproduces, 0 once fixed."""
import os
import tempfile

import numpy as np
import onnx
import openvino as ov
import torch

INPUTS = [
    np.array([], dtype=np.float32).reshape((0,)),
    np.array([], dtype=np.float32).reshape((0,)),
]


class Model(torch.nn.Module):
    def forward(self, x0, x1):
        return torch.pow(x0, x1)


try:
    model = torch.onnx.export(Model(), tuple(torch.tensor(x) for x in INPUTS), dynamo=True, verbose=False).model_proto
    path = os.path.join(tempfile.mkdtemp(), "model.onnx")
    onnx.save(model, path)
    ov_model = ov.convert_model(path)
    compiled = ov.Core().compile_model(ov_model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})  # f32, not bf16
    outputs = list(compiled(INPUTS).values())
except Exception as e:  # the crash the campaign saw: the same exception type and message
    print(f"{type(e).__name__}: {e}")
    if type(e).__name__ == "RuntimeError" and "vector::_M_range_check: __n" in str(e):
        print("REPRODUCED")
        raise SystemExit(1)
    print("a different error than the one reported; the original bug may be fixed")
    raise SystemExit(0)
print("the target ran without error: the bug no longer reproduces")
