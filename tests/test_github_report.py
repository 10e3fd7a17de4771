"""The PR comment, annotations and shard merging, on findings documents shaped like dlci's."""
from __future__ import annotations

import html
import json
import re
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
    body = comment.render(doc([finding(1, repro="repro/F001.py"), finding(2, new=False)]),
                          {"repro/F001.py": b"print('hi')\n"})
    assert body.startswith(comment.MARKER)
    assert "1 new bug in this PR (1 already on base)" in body
    assert body.index("NEW IN THIS PR") < body.index("ALREADY ON BASE")
    assert "selected by `python/tvm/relax/frontend/torch/base_fx_graph_translator.py:466`" in body
    assert "print('hi')" in body and "UNSUPPORTED / SKIPPED" in body


def test_nothing_to_test_comment(tmp_path):
    body = comment.render(doc([], nothing_to_test="the diff touches no operator converter"))
    assert "nothing to test" in body.lower()


def test_comment_fits_githubs_limit_and_says_what_it_left_out(tmp_path):
    many, scripts = [], {}
    for n in range(1, 301):
        scripts[f"repro/F{n:03d}.py"] = b"x = 1\n" * 2000
        many.append(finding(n, repro=f"repro/F{n:03d}.py", message="m" * 3000))
    body = comment.render(doc(many), scripts)
    assert len(body) <= comment.COMMENT_LIMIT
    assert "job summary" in body and "more finding(s) are not listed" in body


def test_untrusted_text_cannot_break_out_of_its_code_block(tmp_path):
    f = finding(1, repro="repro/F001.py")
    f["operator"] = "aten::elu`<img src=x>"
    body = comment.render(doc([f]), {"repro/F001.py": b"s = '''\n```\n## injected heading\n'''\n"})
    assert "````python" in body  # a longer fence than any backtick run inside
    assert "``aten::elu`<img src=x>``" in body  # the name stays whole, in a span its backtick cannot close
    assert "<img" not in _strip_code(body)


def test_annotations_point_at_the_changed_line_with_valid_levels():
    notes, left_out = api.annotations(doc([finding(1), finding(2, new=False)],
                                          coverage={"unreached": [{"file": TOUCH["file"], "line": 470,
                                                                   "region": "X._elu"}]}))
    assert left_out == 0
    assert [(a["start_line"], a["annotation_level"]) for a in notes] == [(466, "failure"), (466, "notice"),
                                                                         (470, "notice")]
    assert all(a["annotation_level"] in ("notice", "warning", "failure") and a["path"] == TOUCH["file"]
               for a in notes)


def test_a_finding_changed_by_the_pr_has_its_own_section_and_fails_no_check():
    """Failing on base too, otherwise (a fix PR that turns a crash into a wrong result): listed as changed by this PR,
    never as new, never as already on base; the verdict does not count it as a new bug; its annotation says so."""
    from dlci.findings import counted
    changed = {**finding(2, new=False), "base": {"status": "crash", "symptom": "NameError", "same_failure": False,
                                                 "changed": True}}
    d = doc([finding(1, new=False), changed])
    body = comment.render(d)
    assert "no new bug; 1 changed by it, failing on base too, 1 already on base" in body
    assert body.index("CHANGED BY THIS PR") < body.index("ALREADY ON BASE")
    section = body.split("CHANGED BY THIS PR", 1)[1].split("ALREADY ON BASE", 1)[0]
    assert "F002" in section and "F001" not in section and "differently (crash: NameError)" in section
    assert counted(d["findings"], "new") == 0 and counted(d["findings"], "any") == 2
    notes, _ = api.annotations(d)
    assert any(n["annotation_level"] == "notice" and "Changed by this PR" in n["message"] for n in notes)
    from dlci.report import render_markdown
    report = render_markdown(d)
    assert "### Changed by this PR (failing on base too, otherwise) (1)" in report
    assert "no: **changed by this PR** (on base the same instances fail too, otherwise: crash, NameError)" in report


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
    from dlci.report import intake
    report, scripts = shards.merge([intake.read_results(tmp_path / k) for k in ("arm64", "cpu")])
    merged = report.to_dict()
    assert [f["id"] for f in merged["findings"]] == ["F001", "F002"]
    same = next(f for f in merged["findings"] if f["signature"] == "same")
    assert sorted(same["runners"]) == ["arm64", "cpu"]
    assert sorted(scripts) == sorted(f["repro"] for f in merged["findings"])
    assert scripts[merged["findings"][0]["repro"]] == b"# arm64 same\n"  # read once, by intake, never again
    assert merged["stats"]["tests_run"] == 20
    assert Path(merged["findings"][0]["repro"]).name.startswith("F001_")


def test_comment_says_since_when_and_keeps_a_commit_subject_inert(tmp_path):
    new = finding(1)
    new["introduced_by"] = {"commit": "c" * 40, "report": 'introduced by cccccccccccc "ELU: use `min`<b>"; parent '
                                                          "aaaaaaaaaaaa good; 2 reproducer runs over 3 commits"}
    old = finding(2, new=False)
    old["since"] = {"package": "apache-tvm", "report": "introduced in apache-tvm 0.26.0; 0.25.0 good; 2 installs"}
    body = comment.render(doc([new, old]))
    assert ("Introduced by commit introduced by cccccccccccc \"ELU: use \\`min\\`&lt;b&gt;\"; parent aaaaaaaaaaaa good"
            in body)
    assert "Since release: introduced in apache-tvm 0.26.0; 0.25.0 good; 2 installs." in body
    assert body.index("Introduced by commit") < body.index("ALREADY ON BASE") < body.index("Since release")


# -- hostile pull requests: whatever the PR (or a fork's artifact) writes stays text --------------------------------

EVIL_OP = "aten::elu``x` @org/team <img src=x onerror=alert(1)> #123"
EVIL_MSG = ("boom\n```\n## injected heading\n<img src=x onerror=alert(1)>\n@octocat @org/team #123 GH-7 owner/repo#9 "
            "https://evil.example/x www.evil.example\n````\n")
EVIL_TEXT = "[x](https://evil.example) ![i](https://evil.example/i.png) @org/team #123 | <details> *b* `c"


def hostile_doc() -> dict:
    """A findings document whose every PR-derived string is an attack (mentions, references, markup, fences)."""
    f = finding(1, message=EVIL_MSG, signature="sig``@user #1")
    f.update(operator=EVIL_OP, symptom=EVIL_TEXT, stage="## stage\n- item @user", oracle="crash\n# heading",
             also_in=["@org/team", "tvm.from_exported_program"], operators=[EVIL_OP, "aten::x`@org/team"],
             origin={"source": "@origin-user", "test": "test_`x` @user"}, target_version="0.27 #5",
             introduced_by={"report": "introduced by cccccccccccc \"fix `min` @org/team #99 <b>\"; parent ok"},
             rule={"name": "r`@x", "category_title": "@org/t", "summary": "#123 GH-4 <script>",
                   "graph_a": "<img src=x>", "graph_b": "@u\n## g"})
    f["repro"] = "repro/F001`@user.py"
    f["extra"] = {"explains_graph_findings": [{"symptom": EVIL_TEXT, "stage": "## s @org/team", "instances": 2,
                                               "instance": "g`@user #3", "operator": EVIL_OP}]}
    known = finding(2, new=False, signature="k")
    known["known"] = {"link": "javascript:alert(1)//@org/team", "note": "tracked in #77 by @maintainer\n## x"}
    old = finding(3, new=False, signature="o")
    old["base"] = {"status": "crash\n@org/team", "symptom": "<img src=x> #44"}
    old["since"] = {"report": "introduced in pkg 1.0 [x](https://evil.example) @org/team"}
    d = doc([f, known, old],
            touched=[dict(TOUCH, file="python/evil\n## injected.py", why="@org/team changed #12 <b>",
                          converter="conv\\|x`y || \\\\|z",
                          targets=["tvm.from_exported_program", "@org/team"]), TOUCH],
            coverage={"changed_statements": 3, "reached_statements": 1, "instances_reaching": 2,
                      "unreached": [{"file": "a`b @user.py", "line": 3, "region": "@org/team <details> #8"}]},
            bisect={"asked": ["commits"], "lines": ["@org/team #5 ## x"], "error": "<img src=x> @u"},
            graph_level=[{"file": "g @user.py", "line": 1, "why": "#123 [l](https://evil.example)"}],
            unmapped=[{"file": "u.py", "line": 2, "region": "@org/team", "why": "<img src=x>"}],
            targets_not_installed=["@org/team #3"], operators=[EVIL_OP], profiles=["@org/team"])
    st = d["stats"]
    st["per_target"]["evil|target @org/team #9"] = {"pass": 0, "unsupported": 2, "invalid": 0, "crash": 0,
                                                     "inconsistency": 0}
    st["flaky"] = [{"signature": "flaky``sig @org/team"}]
    st["unreproduced"] = [{"signature": "u`@user"}]
    st["devices"] = {"@org/team": "<img src=x>"}
    st["device_notes"] = {"#12": "@user"}
    st["not_reproduced_in_budget"] = ["@org/team #1"]
    return d


def _strip_code(md: str) -> str:
    """The markdown a renderer would still read as markdown, approximately by CommonMark: fenced code blocks (closed
    only by a backtick run at least as long as the opening one) and code spans (closed only by a run of the same
    length; a backslash-escaped backtick opens none) removed."""
    kept, fence, in_html = [], None, False
    for line in md.split("\n"):
        run = re.match(r"\s*(`{3,})", line)
        in_html = bool(line.strip()) and (in_html or bool(re.match(r"\s*</?details>", line)))
        if in_html and fence is None:  # an HTML block (ours): no markdown inside, a backtick there is literal
            kept.append(line.replace("`", "'"))
        elif fence is None and run and "`" not in line.strip()[len(run.group(1)):]:
            fence = len(run.group(1))
        elif fence is not None:
            if re.fullmatch(rf"\s*`{{{fence},}}\s*", line):
                fence = None
        else:
            kept.append(line)
    assert fence is None, "a fence was left open"
    text, out, i = "\n".join(kept), [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i:i + 2])
            i += 2
            continue
        run = re.match(r"`+", text[i:])
        if run:
            n = len(run.group(0))
            close = re.compile(rf"(?<!`)`{{{n}}}(?!`)").search(text, i + n)
            if close:
                i = close.end()
                continue
            out.append(run.group(0))
            i += n
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _as_read(md: str) -> str:
    """What a reader sees outside code: backslash escapes and HTML entities resolved (GitHub finds mentions and
    references in that text)."""
    return html.unescape(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", _strip_code(md)))


def assert_inert(md: str) -> None:
    seen = _as_read(md)
    assert not re.search(r"@[A-Za-z0-9]", seen), re.findall(r".{0,30}@[A-Za-z0-9].{0,30}", seen)
    assert not re.search(r"#\d|\bGH-\d", seen, re.I), re.findall(r".{0,30}#\d.{0,10}", seen)
    assert "://" not in seen and "www.evil" not in seen
    outside = _strip_code(md)
    tags = re.findall(r"<(?!/?(?:details|summary|code|sub)>|!-- dlci:)[^>]*>?", outside)
    assert not tags, tags  # only our own tags; none from the input
    assert not re.search(r"\]\(", re.sub(r"\\.", "", outside))  # no [text](link), no ![image](src)
    # no heading the input started: on its own line or in a list item
    assert not re.search(r"^\s*(?:[-*+]\s+)?#{1,6}\s+(?:injected|x|g|stage|heading)\b", outside, re.M)


def _table_rows_keep_their_cells(md: str) -> None:
    """GFM splits a table row at every ``|`` not escaped, inside code spans too (cmark-gfm's row scanner reads a
    backslash and the punctuation after it as one, left to right)."""
    width = None
    for row in md.split("\n"):
        if not row.startswith("|"):
            width = None  # the table ended
            continue
        n = re.sub(r"\\[!-/:-@\[-`{-~]", "E", row).count("|")
        width = width or n  # the header row
        assert n == width, row


def test_hostile_findings_stay_inert_in_the_comment(tmp_path):
    body = comment.render(hostile_doc(),
                          {"repro/F001`@user.py": b"s = '''\n```\n## injected heading\n'''  # @octocat #1\n"})
    assert_inert(body)
    assert "NEW IN THIS PR" in body and "KNOWN ISSUES" in body and "FLAKY" in body
    assert "<img" not in _strip_code(body) and "<script" not in _strip_code(body)
    # the names are still there to read, in code spans that the name cannot close
    assert f"```{EVIL_OP}```" in body and "```flaky``sig @org/team```" in body
    assert "````python" in body  # the reproducer's fence is longer than its ``` line
    # the known issue's javascript: link is shown, never a link
    assert "`javascript:alert(1)//@org/team`" in body and "tracked in #&#8203;77 by @&#8203;maintainer" in body


def test_hostile_findings_stay_inert_in_the_report_and_its_tables_keep_their_columns():
    from dlci.report import render_markdown
    md = render_markdown(hostile_doc())
    assert_inert(md)
    _table_rows_keep_their_cells(md)
    assert "<img" not in _strip_code(md) and "<details>" in md  # our <details> around the message only
    assert "`````\nboom\n```\n## injected heading" in md  # the message's fence outlasts its ``` and ```` lines
    assert md.count("## injected heading") == 1 and f"```{EVIL_OP}```" in md


def test_hostile_annotations_are_plain_text_at_safe_paths_and_capped():
    d = hostile_doc()
    bad = ["../../etc/passwd", "/etc/passwd", "a\nb.py", "a\\..\\b.py", "", "ok/../../x.py"]
    d["pr"]["coverage"]["unreached"] = [{"file": p, "line": 1, "region": None} for p in bad] + \
        [{"file": "./ok.py", "line": "7", "region": "@org/team"}, {"file": "ok.py", "line": "x", "region": None}]
    d["findings"][2].update(id="F003 @user", symptom=EVIL_TEXT, message=EVIL_MSG + "\x00\x1b[31m")
    notes, left_out = api.annotations(d)
    assert left_out == 0
    assert [a["path"] for a in notes] == [TOUCH["file"], TOUCH["file"], "ok.py"]  # F002 and F003, the gap
    assert [a["start_line"] for a in notes] == [466, 466, 7]
    title, message = notes[1]["title"], notes[1]["message"]
    assert "\n" not in title and len(title) <= 255 and "@org" not in title and "@\u200borg/team" in title
    assert "@octocat" not in message and "@\u200boctocat" in message and len(message) <= 4000
    assert not any(re.search(r"[\x00-\x08\x0b-\x1f\x7f]", a["title"] + a["message"]) for a in notes)
    many = doc([], coverage={"unreached": [{"file": "m.py", "line": n, "region": None} for n in range(1, 251)]})
    notes, left_out = api.annotations(many)
    assert len(notes) == api.ANNOTATIONS_TOTAL and left_out == 250 - api.ANNOTATIONS_TOTAL


def test_escape_functions():
    from dlci.report import escape
    assert escape.code("a`b") == "``a`b``" and escape.code("`x") == "`` `x ``" and escape.code("") == "` `"
    assert escape.code("a\nb\x00c") == "`a b c`" and escape.code("x" * 300).endswith("…`")
    assert escape.code("a|b", cell=True) == "`a\\|b`" and len(escape.code("x" * 300)) == 202
    assert escape.code("a\\|b", cell=True) == "`a\\\\\\|b`"  # the row scanner pairs "\\\\", then "\\|"
    assert escape.prose("1. step") == "1\\. step" and escape.prose("- item").startswith("\\-")
    assert escape.prose("0.27") == "0.27" and escape.prose("-1.5") == "-1.5"  # no list marker: left as is
    assert escape.prose("#12 and GH-3, see o/r#4") == "\\#&#8203;12 and GH-&#8203;3, see o/r#&#8203;4"
    assert escape.prose("base_fx_graph(x) -> y") == "base_fx_graph(x) -&gt; y"  # reads as it was written
    assert escape.prose("&#64;user <b>") == "&amp;#&#8203;64;user &lt;b&gt;"
    assert escape.fence("a\n```\n````b") == "`````\na\n```\n````b\n`````"
    assert escape.fence("x\ry", "py") == "```py\nx\ny\n```"
    assert escape.plain("@team\nnext\x07", 100) == "@\u200bteam next" and escape.plain("x" * 10, 5) == "xxxx…"
    assert escape.plain("a\r\nb", multiline=True) == "a\nb"
    assert escape.html('r/"F<1>@x.py') == "r/&quot;F&lt;1&gt;@&#8203;x.py"


def test_a_long_comment_is_cut_at_a_paragraph_end_outside_code():
    """The last resort cut never leaves a fence or a code span open: a mention escaped by being inside code stays
    inert."""
    para = "Text `a span that runs\nover @octocat a line break` and more.\n\n"
    fenced = "```python\nx = '@octocat'\n" + "y = 1\n" * 50 + "```\n\n"
    body = (para + fenced) * 200
    for limit in range(500, 4000, 37):
        cut = comment.cut(body, limit)
        assert len(cut) <= limit
        assert cut.count("```") % 2 == 0, cut[-200:]
        for paragraph in cut.split("\n\n"):
            if not paragraph.startswith("```"):
                assert paragraph.count("`") % 2 == 0, paragraph
    assert comment.cut("short", 100) == "short"


def test_the_report_has_one_row_per_touched_operator_and_one_count_of_changed_statements():
    from dlci.report import render_markdown
    touch = dict(TOUCH)
    touched = [{**touch, "operator": op, "line": line, "why": f"helper h{line} changed"}
               for op in ("elu", "selu") for line in (10, 20, 30)]
    d = doc([], touched=touched, coverage={"changed_statements": 7, "reached_statements": 3, "instances_reaching": 2,
                                           "unreached": []},
            directed={"goals": 9, "reached": 4, "statements": 5, "statements_reached": 2, "branches": 4,
                      "unreached": []})
    md = render_markdown(d)
    rows = [ln for ln in md.splitlines() if ln.startswith("| `elu") or ln.startswith("| `selu")]
    assert len(rows) == 2 and all(r.count("helper h") == 3 for r in rows), rows
    assert "2 of 5 changed statements" in md and "Changed converter statements run by the tests" not in md


def test_operators_one_changed_line_took_support_from_are_one_entry_of_the_comment():
    """A shared helper that breaks takes many operators' support at once (TVM's ONNX importer lost 15 to one
    initializer lookup): one entry names them all, the section still counts each finding, and fewer than
    GROUP_MIN, another target or a finding already on base stay entries of their own."""
    def support(n, op, *, new=True, target="tvm.from_exported_program"):
        f = finding(n, new=new, repro=f"repro/F{n:03d}.py")
        f.update(oracle="support", symptom="support removed", stage="convert", operator=op, target=target,
                 operators=[op])
        return f
    touched = [dict(TOUCH, operator=op) for op in ("elu.default", "selu.default", "celu`<b>.default")]
    group = [support(n, f"aten::{op}") for n, op in ((1, "elu"), (2, "selu"), (3, "celu`<b>"))]
    others = [finding(4), support(5, "aten::elu", target="tvm.from_fx"), support(6, "aten::selu", new=False)]
    d = doc(group + others, touched=touched + [dict(TOUCH, targets=["tvm.from_fx"])])
    body = comment.render(d, {})
    assert "### NEW IN THIS PR (5)" in body and "### ALREADY ON BASE (1)" in body
    assert "**F001 … F003** 3 operators through **tvm.from_exported_program**: support — support removed" in body
    assert "`aten::elu`, `aten::selu`, ``aten::celu`<b>``" in body and "<b>" not in _strip_code(body)
    assert "each failing on this PR and passing on base" in body
    for alone in ("**F004** `aten::elu`", "**F005** `aten::elu` through **tvm.from_fx**", "**F006** `aten::selu`"):
        assert alone in body
    two = comment.render(doc(group[:2] + others, touched=touched), {})  # below GROUP_MIN: one by one
    assert "**F001** `aten::elu`" in two and "**F002** `aten::selu`" in two and "…" not in two.split("###", 2)[1]
    # the commit a bisection named is shown once when every member shares it; a member it differs for stands alone
    since = [dict(f, introduced_by={"report": "abc1234 importer: look initializers up by name"}) for f in group]
    shared = comment.render(doc(since + others, touched=touched + [dict(TOUCH, targets=["tvm.from_fx"])]), {})
    assert "**F001 … F003** 3 operators" in shared
    assert shared.count("Introduced by commit abc1234 importer: look initializers up by name.") == 1
    since[2]["introduced_by"] = {"report": "def5678 another commit"}
    split = comment.render(doc(since + others, touched=touched), {})
    assert "**F001 … F003**" not in split and "Introduced by commit def5678 another commit." in split
    assert split.count("Introduced by commit abc1234") == 2


def test_graph_failures_an_operators_new_failure_explains_are_folded_into_it():
    """A real TVM fix reverted (ReduceL1 at opset 18) gave 2 operator findings and 25 more, one per generated graph
    holding a ReduceL1 whose wrong shape a later node trips on; localisation tested each node alone and ReduceL1
    failed. Those graphs are that finding again: folded into it and said once, in the report and the comment. A
    graph whose lone failing operator has no new finding of its own, or is old, or none fails alone, stays."""
    from dlci.findings import Finding
    from dlci.report import render_markdown
    from dlci.scan import _fold_explained_graph_findings

    def f(n, op, *, new=True, source="opinfo", alone=None, target="tvm.from_onnx", symptom="shape mismatch"):
        extra = {"graph": {"multi_operator": True, "framework": "onnx", "each_operator_alone": alone}} \
            if alone is not None else {}
        return Finding(id=f"F{n:03d}", oracle="crash" if source == "fuzz" else "inconsistency", operator=op,
                       target=target, target_version="0.27", symptom=symptom, stage="convert", signature=f"s{n}",
                       message="", instance_id=f"i{n}", origin={"source": source, "test": "t"},
                       instances=[f"i{n}"], operators=[op], new_in_pr=new, base={"status": "pass"}, extra=extra)
    l1 = f(1, "onnx::ReduceL1")
    old_max = f(2, "onnx::ReduceMax", new=False)
    broken = {"0:ReduceL1": "inconsistency (shape mismatch)", "1:Slice": "pass"}
    explained = [f(n, f"graph::fuzz{n}", source="fuzz", alone=broken, symptom="ValueError") for n in (3, 4)]
    kept = [f(5, "graph::fuzz5", source="fuzz", alone={"0:ReduceMax": "crash", "1:Slice": "pass"}),  # old op
            f(6, "graph::fuzz6", source="fuzz", alone={"0:ReduceL1": "pass", "1:Slice": "pass"}),  # none alone
            f(7, "graph::fuzz7", source="fuzz", alone=broken, target="tvm.from_onnx.cuda"),  # another target
            f(8, "graph::fuzz8", source="fuzz", alone=broken, new=False)]  # old itself: not folded
    out = _fold_explained_graph_findings([l1, old_max, *explained, *kept])
    assert [x.id for x in out] == ["F001", "F002", "F005", "F006", "F007", "F008"]
    assert [g["operator"] for g in l1.extra["explains_graph_findings"]] == ["graph::fuzz3", "graph::fuzz4"]
    d = doc([x.to_dict() for x in out[:1]])
    assert "It also breaks 2 generated graph(s)" in comment.render(d, {})
    assert "it also breaks 2 generated graph(s) it is part of, which fail there and pass on base: " \
        "2× ValueError at convert" in render_markdown(d)



def test_what_the_fuzz_share_met_on_base_too_is_one_line_per_operator_and_target():
    """onnx-cumsum-reverse's scan met three failures of onnx::Resize the base shows the same way: the report named
    the operator three times; it names it once, with the symptoms and how many signatures."""
    from dlci.report import render_markdown
    resize = {"operator": "onnx::Resize", "target": "tvm.from_onnx"}
    doc = {"stats": {"tests_run": 3, "tests_valid": 3, "seconds": 1.0}, "findings": [],
           "pr": {"base": "a" * 40, "head": "b" * 40,
                  "fuzz": {"share": 0.3, "targets": ["tvm.from_onnx"], "why": "networks around CumSum"},
                  "fuzz_already_on_base": [{**resize, "symptom": "ValueError"}, {**resize, "symptom": "shape mismatch"},
                                           {**resize, "symptom": "ValueError"},
                                           {"operator": "onnx::Pow", "target": "tvm.from_onnx", "symptom": "TypeError"}]}}
    line = next(x for x in render_markdown(doc).splitlines() if x.startswith("It also met"))
    assert line.endswith("(not the PR's, not listed): `onnx::Resize` on tvm.from_onnx (ValueError, shape mismatch; "
                         "3 signatures), `onnx::Pow` on tvm.from_onnx (TypeError).")
    assert line.startswith("It also met 4 failure(s)")
