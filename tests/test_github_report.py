"""The PR comment, annotations and shard merging, on findings documents shaped like dlci's."""
from __future__ import annotations

import json
from pathlib import Path

from dlci.github import api, comment, shards

TOUCH = {"operator": "elu.default", "namespace": "aten", "converter": "self._elu",
         "file": "python/tvm/relax/frontend/torch/base_fx_graph_translator.py", "line": 466,
         "why": "converter changed", "targets": ["tvm.from_exported_program"], "profile": "tvm"}


def finding(n: int, *, new=True, repro="", signature=None, message="1 of 1 elements differ") -> dict:
    return {"id": f"F{n:03d}", "oracle": "inconsistency", "operator": "aten::elu", "target": "tvm.from_exported_program",
            "target_version": "0.27", "symptom": "value mismatch", "stage": "compare",
            "signature": signature or f"sig{n}", "message": message, "instance_id": f"i{n}", "origin": {},
            "instances": [f"i{n}"], "operators": ["aten::elu"], "also_in": [], "new_in_pr": new,
            "base": {"status": "pass"} if new else {"status": "inconsistency", "same_failure": True},
            "repro": repro, "repro_checked": True, "repro_passes_on_base": bool(new)}


def doc(findings, **pr) -> dict:
    return {"version": 1, "findings": findings,
            "stats": {"tests_run": 10, "tests_valid": 9, "seconds": 12.0, "flaky": [],
                      "per_target": {"tvm.from_exported_program": {"pass": 8, "unsupported": 1, "invalid": 0,
                                                                   "crash": 0, "inconsistency": 1}}},
            "pr": {"base": "a" * 40, "head": "b" * 40, "touched": [TOUCH], "operators": ["elu"], **pr}}


def test_comment_sections_and_verdict(tmp_path):
    (tmp_path / "repro").mkdir()
    (tmp_path / "repro" / "F001.py").write_text("print('hi')\n")
    body = comment.render(doc([finding(1, repro="repro/F001.py"), finding(2, new=False)]), tmp_path)
    assert body.startswith(comment.MARKER)
    assert "1 new bug in this PR (1 already on base)" in body
    assert body.index("NEW IN THIS PR") < body.index("ALREADY ON BASE")
    assert "selected by `python/tvm/relax/frontend/torch/base_fx_graph_translator.py:466`" in body
    assert "print('hi')" in body and "UNSUPPORTED / SKIPPED" in body


def test_nothing_to_test_comment(tmp_path):
    body = comment.render(doc([], nothing_to_test="the diff touches no operator converter"), tmp_path)
    assert "nothing to test" in body.lower()


def test_comment_fits_githubs_limit_and_says_what_it_left_out(tmp_path):
    (tmp_path / "repro").mkdir()
    many = []
    for n in range(1, 301):
        (tmp_path / "repro" / f"F{n:03d}.py").write_text("x = 1\n" * 2000)
        many.append(finding(n, repro=f"repro/F{n:03d}.py", message="m" * 3000))
    body = comment.render(doc(many), tmp_path)
    assert len(body) <= comment.COMMENT_LIMIT
    assert "job summary" in body and "more finding(s) are not listed" in body


def test_untrusted_text_cannot_break_out_of_its_code_block(tmp_path):
    (tmp_path / "repro").mkdir()
    (tmp_path / "repro" / "F001.py").write_text("s = '''\n```\n## injected heading\n'''\n")
    f = finding(1, repro="repro/F001.py")
    f["operator"] = "aten::elu`<img src=x>"
    body = comment.render(doc([f]), tmp_path)
    assert "````python" in body  # a longer fence than any backtick run inside
    assert "`<img" not in body and "<img" not in body


def test_annotations_point_at_the_changed_line_with_valid_levels():
    notes = api.annotations(doc([finding(1), finding(2, new=False)],
                                coverage={"unreached": [{"file": TOUCH["file"], "line": 470, "region": "X._elu"}]}))
    assert [(a["start_line"], a["annotation_level"]) for a in notes] == [(466, "failure"), (466, "notice"),
                                                                         (470, "notice")]
    assert all(a["annotation_level"] in ("notice", "warning", "failure") and a["path"] == TOUCH["file"]
               for a in notes)


def test_plan_routes_each_touch_to_the_runner_kinds_where_its_code_runs():
    from dlci.profiles.base import Touch
    runners = shards.parse_runner_labels('{"cpu": "ubuntu-latest", "gpu": ["self-hosted", "gpu"], '
                                         '"arm64": ["self-hosted", "arm64"]}')
    fx = Touch("elu", "aten", "_elu", TOUCH["file"], 466, "converter changed", ("tvm.from_fx",), "tvm")
    cuda = Touch("softplus", "aten", "softplus_kernel", "aten/src/ATen/native/cuda/ActivationSoftplusKernel.cu", 30,
                 "kernel softplus_kernel changed", ("torch.cuda", "torch.compile.cuda"), "pytorch")
    neon = Touch("Sigmoid", "onnx", "MlasLogistic", "onnxruntime/core/mlas/lib/aarch64/LogisticKernelNeon.S", 12,
                 "MLAS routine changed", ("onnxruntime",), "onnxruntime")
    planned = shards.plan([fx, cuda, neon], runners)
    assert planned["matrix"]["include"] == [  # a frontend's code: x86-64 and arm64 (TVM's LLVM codegen differs there)
        {"shard": "cpu-tvm.from_fx", "kind": "cpu", "runner": ["ubuntu-latest"], "targets": "tvm.from_fx"},
        # the GPU kind: one shard for all its targets (scarce runners)
        {"shard": "gpu-torch.compile.cuda+torch.cuda", "kind": "gpu", "runner": ["self-hosted", "gpu"],
         "targets": "torch.compile.cuda,torch.cuda"},
        {"shard": "arm64-onnxruntime", "kind": "arm64", "runner": ["self-hosted", "arm64"], "targets": "onnxruntime"},
        {"shard": "arm64-tvm.from_fx", "kind": "arm64", "runner": ["self-hosted", "arm64"], "targets": "tvm.from_fx"}]
    why = {s["shard"]: s["why"] for s in planned["shards"]}
    assert why["arm64-onnxruntime"] == ["the changed code is built for arm64 only; Sigmoid at "
                                        "onnxruntime/core/mlas/lib/aarch64/LogisticKernelNeon.S:12: MLAS routine changed"]
    assert why["cpu-tvm.from_fx"][0].startswith("tvm.from_fx's code generation differs on aarch64; elu at ")
    only_cpu = shards.plan([cuda], shards.parse_runner_labels(""))
    assert only_cpu["matrix"]["include"][0]["targets"] == "" and only_cpu["unrouted"][0]["reason"] == \
        "no GPU runner kind in runner-labels"  # never an empty matrix, never GPU work on a CPU runner
    assert [shards.kind_role(k) for k in ("cpu", "gpu-a100", "arm64", "aarch64-graviton", "x86")] == \
        ["x86_64", "gpu", "aarch64", "aarch64", "x86_64"]


def test_merge_shards_dedups_signatures_and_renumbers(tmp_path):
    for kind, sigs in (("cpu", ["same", "cpu-only"]), ("arm64", ["same"])):
        d = tmp_path / kind
        (d / "repro").mkdir(parents=True)
        fs = []
        for n, sig in enumerate(sigs, start=1):
            (d / "repro" / f"F{n:03d}_x.py").write_text(f"# {kind} {sig}\n")
            fs.append(finding(n, signature=sig, repro=f"repro/F{n:03d}_x.py"))
        (d / "findings.json").write_text(json.dumps(doc(fs)))
        (d / "shard.json").write_text(json.dumps({"shard": f"{kind}-tvm.from_fx", "kind": kind}))
    merged = shards.merge([tmp_path / "arm64", tmp_path / "cpu"], tmp_path / "out").to_dict()
    assert [f["id"] for f in merged["findings"]] == ["F001", "F002"]
    same = next(f for f in merged["findings"] if f["signature"] == "same")
    assert sorted(same["runners"]) == ["arm64", "cpu"]
    assert all((tmp_path / "out" / f["repro"]).is_file() for f in merged["findings"])
    assert merged["stats"]["tests_run"] == 20
    assert Path(tmp_path / "out" / merged["findings"][0]["repro"]).name.startswith("F001_")


def test_comment_says_since_when_and_keeps_a_commit_subject_inert(tmp_path):
    new = finding(1)
    new["introduced_by"] = {"commit": "c" * 40, "report": 'introduced by cccccccccccc "ELU: use `min`<b>"; parent '
                                                          "aaaaaaaaaaaa good; 2 reproducer runs over 3 commits"}
    old = finding(2, new=False)
    old["since"] = {"package": "apache-tvm", "report": "introduced in apache-tvm 0.26.0; 0.25.0 good; 2 installs"}
    body = comment.render(doc([new, old]), tmp_path)
    assert ("Introduced by commit introduced by cccccccccccc \"ELU: use 'min'&lt;b>\"; parent aaaaaaaaaaaa good"
            in body)
    assert "Since release: introduced in apache-tvm 0.26.0; 0.25.0 good; 2 installs." in body
    assert body.index("Introduced by commit") < body.index("ALREADY ON BASE") < body.index("Since release")
