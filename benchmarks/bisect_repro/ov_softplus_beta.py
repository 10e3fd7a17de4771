"""OpenVINO PyTorch frontend: softplus(x, beta=3) is converted as if beta were 1 (found by dlci in 2026.4.1; bad
in every release that converts aten::softplus, 2023.3.0 on). dlci's own reproducer: exits 1 while the bug
reproduces, 0 once fixed."""
import numpy as np
import openvino as ov
import torch

INPUTS = [np.array([0.0], dtype=np.float32).reshape(())]
# the campaign's reference: eager torch 2.13.0+cpu; torch in float64 arbitrates rounding
EXPECTED = np.array([0.23104906], dtype=np.float32).reshape(())
EXPECTED64 = np.array([0.23104906018664842], dtype=np.float64).reshape(())
TOLERANCE = dict(rtol=1.3e-06, atol=1e-05, multiplier=3.0, floor=0.0001)  # the campaign's, for this dtype


class Model(torch.nn.Module):
    def forward(self, x0):
        return torch.nn.functional.softplus(x0, beta=3)


def values_differ(got, ref, ref64, rtol, atol, multiplier, floor):
    """Beyond (rtol, atol) where both are finite, and (with ref64) further from fp64 than rounding explains."""
    ok = np.isfinite(got) & np.isfinite(ref)
    beyond = bool(np.any(np.abs(got[ok] - ref[ok]) > atol + rtol * np.abs(ref[ok])))
    if not beyond or ref64 is None:
        return beyond
    ok &= np.isfinite(ref64)
    g, r, r64 = got[ok], ref[ok], ref64[ok]
    rms = [float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0 for a in (g - r64, r - r64, r64)]
    return rms[0] > multiplier * rms[1] + floor * rms[2] + atol


ov_model = ov.convert_model(Model(), example_input=tuple(torch.tensor(x) for x in INPUTS))
ov_model.reshape({p: ov.PartialShape(list(x.shape)) for p, x in zip(ov_model.inputs, INPUTS)})  # static shapes
compiled = ov.Core().compile_model(ov_model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})  # f32, not bf16
outputs = list(compiled(INPUTS).values())
if values_differ(np.asarray(outputs[0], np.float64), EXPECTED.astype(np.float64), EXPECTED64, **TOLERANCE):
    print(f"REPRODUCED value mismatch: the target gives {outputs[0]}, the reference {EXPECTED}")
    raise SystemExit(1)
print(f"consistent with the reference ({outputs[0]}): the bug no longer reproduces")
