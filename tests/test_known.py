"""Known issues (.dlci.yml known_issues) and `dlci triage`."""
from __future__ import annotations

import json

import pytest
import yaml

from dlci.cli import main
from dlci.config import Config, ConfigError
from dlci.errors import ExitCode
from dlci.findings import counted
from dlci.findings.known import parse
from dlci.report.document import Report

EXIT_CLEAN, EXIT_USAGE = ExitCode.CLEAN, ExitCode.USAGE


def finding(n, target="tvm.from_fx", operator="nn::ELU", symptom="value mismatch", new=True, signature=None):
    return {"id": f"F{n:03d}", "oracle": "inconsistency", "target": target, "operator": operator, "symptom": symptom,
            "signature": signature or f"{target}|compare|{operator}|{symptom}", "new_in_pr": new, "repro": "",
            "target_version": "", "stage": "compare", "message": "", "instance_id": "", "origin": {}}


def report_of(*findings) -> Report:
    return Report.from_dict({"version": 1, "findings": list(findings),
                             "stats": {"tests_run": 2, "tests_valid": 2, "seconds": 1.0, "per_target": {}}})


def test_entries_match_by_signature_or_fields():
    known = parse([{"signature": "tvm.from_fx|compare|nn::ELU|*", "link": "https://x/1"},
                   {"target": "openvino.*", "operator": "aten::softplus", "note": "beta ignored"}])
    report = report_of(finding(1), finding(2, target="openvino.pytorch", operator="aten::softplus"),
                       finding(3, operator="aten::elu"))
    assert report.mark_known(known) == 2
    assert report.findings[0].known["link"] == "https://x/1"
    assert report.findings[1].known["note"] == "beta ignored"
    assert report.findings[2].known is None
    assert counted(report.findings, "any") == 1 and counted(report.findings, "new") == 1  # known never fail a run
    assert report.counted("any") == 1 and report.counted("never") == 0


@pytest.mark.parametrize("entries, message", [
    ([{"link": "https://x"}], "needs at least one of"),
    ([{"signature": "a*"}], "needs a link or a note"),
    ([{"signature": "a*", "link": "x", "colour": "red"}], "unknown key(s) colour"),
    (["tvm"], "must be a mapping"),
])
def test_malformed_entries_are_configuration_errors(entries, message):
    with pytest.raises(ConfigError) as e:
        Config.parse(yaml.safe_dump({"known_issues": entries}))
    assert message in str(e.value)


def test_triage_lists_signatures_and_its_suggestions_match_literally(tmp_path, capsys):
    tricky = "tvm.from_fx|compare|aten::avg_pool2d|shape [2, 3] != expected [2, 4] (*?)"
    report = report_of(finding(1), finding(2, signature=tricky))
    report.write(tmp_path)
    assert main(["triage", str(tmp_path)]) == EXIT_CLEAN
    out = capsys.readouterr().out
    assert tricky in out and "F002" in out
    snippet = yaml.safe_load(out[out.index("known_issues:"):])
    known = Config.parse(yaml.safe_dump(snippet)).known()
    assert report.mark_known(known) == 2
    # a pattern that is another finding's literal signature does not match by accident
    assert not parse([{"signature": "tvm.from_fx|compare|aten::avg_pool2d|shape [2, 3] != expected [2, 4] (x)",
                       "note": "n"}])[0].matches(report.findings[1])
    (tmp_path / "known.yml").write_text(yaml.safe_dump(snippet))
    assert main(["triage", str(tmp_path), "--known", str(tmp_path / "known.yml"), "--json"]) == EXIT_CLEAN
    assert all(f["known"] for f in json.loads(capsys.readouterr().out))


def test_triage_of_a_missing_run_is_a_usage_error(tmp_path):
    assert main(["triage", str(tmp_path / "nope")]) == EXIT_USAGE
