"""OpenVINO as a torch.compile backend: dynamo captures the module, OpenVINO's FX frontend converts the graph and the
CPU plugin runs it (f32 precision, as for the other OpenVINO targets)."""
from __future__ import annotations

from dlci.errors import chain
from dlci.targets.base import register
from dlci.targets.openvino import _OpenVINO
from dlci.targets.torch_compile import DynamoTarget, dynamo_unsupported


@register
class OpenVINOTorchCompile(DynamoTarget, _OpenVINO):
    name = "openvino.torch_compile"
    package = "openvino"
    modules = ("openvino",)
    reaches = ("openvino:frontend.pytorch.fx", "openvino:torchdynamo", "openvino:cpu", "pytorch:eager",
               "pytorch:dynamo", "pytorch:decompositions")
    test_style = None  # no OpenVINO layer-test harness for this entry point: the standalone script only
    timeout = 240.0    # dynamo + conversion on the first call
    batch_size = 16    # 48 opinfo tests: 2.1x the tests per minute packed

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        return any(dynamo_unsupported(e) for e in chain(exc)) or super().is_unsupported(exc, stage)

    def backend(self) -> tuple[str, dict]:
        import openvino.torch  # noqa: F401  (registers the "openvino" backend)
        # aot_autograd: the backend needs it on torch 2.13 (see stack notes)
        return "openvino", {"options": {"aot_autograd": True, "device": "CPU",
                                        "config": {"INFERENCE_PRECISION_HINT": "f32"}}}
