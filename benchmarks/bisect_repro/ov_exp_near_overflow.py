#!/usr/bin/env python3
"""OpenVINO CPU: exp(x) of a torch module converted with openvino.convert_model returns +inf for float32 x just
below the overflow threshold (x <= 88.72, where exp(x) < FLT_MAX = 3.4028235e38); eager torch and numpy give the
finite value. Exits 1 while the bug reproduces, 0 once it is fixed (dlci's reproducer contract).
"""
import sys

import numpy as np
import openvino as ov
import torch


class Exp(torch.nn.Module):
    def forward(self, x):
        return torch.exp(x)


def main():
    x = np.array([88.5, 88.7, 88.72, 10.0], dtype=np.float32)
    model = ov.convert_model(Exp(), example_input=(torch.from_numpy(x),))
    # f32: on AVX512_BF16 hosts OpenVINO computes in bf16 by default, which overflows for other reasons
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = np.asarray(compiled([x])[0])
    want = np.exp(x.astype(np.float64))
    print(f"openvino {ov.__version__}: exp({x.tolist()}) = {got.tolist()}; fp64 reference {want.tolist()}")
    wrong = np.isinf(got) & (want < np.finfo(np.float32).max)
    if wrong.any():
        print(f"REPRODUCED +inf for finite exp at x = {x[wrong].tolist()}")
        return 1
    if not np.allclose(got, want, rtol=1e-5):
        print("a different mismatch than the one reported; the original bug may be fixed")
    else:
        print("finite and close to the reference: the bug no longer reproduces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
