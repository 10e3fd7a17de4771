"""The disk store of exported models (dlci.models.store): an export made once is read back by the next target or
worker that consumes the same form, failures included, and an instance whose content changed is exported again."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from dlci import models, sources  # noqa: E402
from dlci.models import store  # noqa: E402
from dlci.models.pack import PACKERS, PackFailed  # noqa: E402
from dlci.models.references import reference  # noqa: E402


@pytest.fixture(scope="module")
def opinfo():
    insts = sources.load("opinfo", ops=["aten::abs", "aten::add", "aten::cdist"], limit_per_op=1)
    return {i.op: i for i in insts}


@pytest.fixture
def exports(monkeypatch, tmp_path):
    """A fresh store; counts the real exports made (torch.onnx.export through dlci.models.export_onnx)."""
    monkeypatch.setenv("DLCI_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DLCI_FORM_STORE", raising=False)
    calls = []
    real = models.export_onnx

    def counted(module, tensors):
        calls.append(module)
        return real(module, tensors)
    monkeypatch.setattr(models, "export_onnx", counted)
    models.clear_cache()
    yield calls
    models.clear_cache()


def test_an_export_is_made_once_and_read_back(opinfo, exports, tmp_path):
    inst = opinfo["aten::abs"]
    first = models.build(inst, "onnx")
    models.clear_cache()  # another worker, or the next target of the campaign
    again = models.build(inst, "onnx")
    assert len(exports) == 1
    assert again.SerializeToString() == first.SerializeToString()
    assert list((tmp_path / "forms").rglob("*.json"))


def test_a_changed_instance_is_not_served_a_stale_export(opinfo, exports):
    inst = opinfo["aten::abs"]
    models.build(inst, "onnx")
    arrays = dict(inst.arrays)
    arrays["in:0"] = np.asarray(arrays["in:0"])[..., :1].copy()  # other inputs under the same id
    changed = dataclasses.replace(inst, arrays=arrays, inputs=[dataclasses.replace(inst.inputs[0],
                                                                                    shape=list(arrays["in:0"].shape))])
    changed.id = inst.id
    assert store.key("onnx", [changed]) != store.key("onnx", [inst])
    models.clear_cache()
    model = models.build(changed, "onnx")
    assert len(exports) == 2
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == list(arrays["in:0"].shape)
    assert store.key("onnx", [dataclasses.replace(inst, seed=inst.seed + 1)]) != store.key("onnx", [inst])


def test_a_stored_export_failure_reads_as_the_failure_itself(opinfo, exports):
    from dlci.testcase import execute
    pytest.importorskip("tvm")
    inst = opinfo["aten::cdist"]  # torch.onnx has no function for aten._cdist_forward
    live = execute(inst, "tvm.from_onnx")
    models.clear_cache()
    stored = execute(inst, "openvino.onnx" if _has("openvino") else "tvm.from_onnx")
    assert len(exports) == 1
    assert live.status == stored.status == "invalid" and live.stage == stored.stage == "model"
    assert (stored.symptom, stored.message) == (live.symptom, live.message)


def test_a_packed_export_and_its_failure_are_stored_under_the_members(opinfo, exports):
    packer = PACKERS["onnx"]
    picked = [opinfo["aten::abs"], opinfo["aten::add"]]
    mods = [models.build(i, "torch_module") for i in picked]
    n_out = [len(reference(i)[0]) for i in picked]
    first, n_in, _ = packer.pack(picked, mods, n_out)
    models.clear_cache()  # another worker: read from the disk
    again, n_in2, _ = packer.pack(picked, mods, n_out)
    assert len(exports) == 1 and n_in2 == n_in
    assert again.SerializeToString() == first.SerializeToString()
    # another member set is another entry; a failure names the same culprit when read back
    bad = [opinfo["aten::abs"], opinfo["aten::cdist"]]
    bad_mods = [models.build(i, "torch_module") for i in bad]
    bad_out = [len(reference(i)[0]) for i in bad]
    with pytest.raises(PackFailed) as live:
        packer.pack(bad, bad_mods, bad_out)
    models.clear_cache()
    with pytest.raises(PackFailed) as read:
        packer.pack(bad, bad_mods, bad_out)
    assert len(exports) == 2
    assert live.value.members == read.value.members == [1]  # the graph node that failed reads cdist's inputs
    assert "_cdist_forward" in str(read.value)


def test_a_part_of_a_packed_export_is_cut_out_of_it_not_exported_again(opinfo, exports):
    import onnxruntime
    packer = PACKERS["onnx"]
    picked = [opinfo["aten::abs"], opinfo["aten::add"]]
    mods = [models.build(i, "torch_module") for i in picked]
    n_out = [len(reference(i)[0]) for i in picked]
    packer.pack(picked, mods, n_out)
    part, n_in, got_out = packer.pack(picked[1:], mods[1:], n_out[1:])  # a split after the target failed the pair
    assert len(exports) == 1 and got_out == n_out[1:]
    sess = onnxruntime.InferenceSession(part.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, dict(zip([x.name for x in sess.get_inputs()], picked[1].input_arrays())))
    for got, want in zip(outs, reference(picked[1])[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_the_store_can_be_turned_off(opinfo, exports, monkeypatch, tmp_path):
    monkeypatch.setenv("DLCI_FORM_STORE", "off")
    models.build(opinfo["aten::abs"], "onnx")
    models.clear_cache()
    models.build(opinfo["aten::abs"], "onnx")
    assert len(exports) == 2 and not (tmp_path / "forms").exists()


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


def test_the_store_may_be_a_folder_of_its_own(opinfo, exports, monkeypatch, tmp_path):
    monkeypatch.setenv("DLCI_FORM_STORE", str(tmp_path / "elsewhere"))
    models.build(opinfo["aten::abs"], "onnx")
    assert list((tmp_path / "elsewhere").rglob("*.json")) and not (tmp_path / "forms").exists()
