"""Reproducers of equivalence-rule findings: the rule's own code, the instance's model code and dlci's comparison,
in one standalone script (exit 1 while graph A and graph B still disagree, 0 once they agree)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from dlci.findings.repro import template_env, array_code, compare_source, ignored_for, message_key, skip_values_for
from dlci.instance import Instance


def render_rule_repro(finding, inst: Instance, repro_dir: Path) -> Path:
    from dlci.rules import CATEGORIES, get_rule
    from dlci.rules.runner import framework_imports, model_code
    rule = get_rule(finding.target)
    text = template_env().get_template("rules/repro.py.j2").render(
        f=_View(finding), rule=rule, category=CATEGORIES[rule.category], inst=inst,
        imports=framework_imports(rule.library), inputs=[array_code(x) for x in inst.input_arrays()],
        call_json=json.dumps(inst.call, default=str), params_json=json.dumps(inst.params, default=str),
        model_code=model_code(inst), compare_code=compare_source(),
        skip_values=repr(skip_values_for(inst)) if skip_values_for(inst) else "set()",
        ignore=repr(ignored_for(inst)) if ignored_for(inst) else "set()", exact=repr(bool(rule.exact)),
        message_key=message_key(finding.message))
    safe_op = re.sub(r"[^A-Za-z0-9_]+", "_", finding.operator).strip("_")
    path = repro_dir / f"{finding.id}_{finding.target.replace('.', '_')}_{safe_op}.py"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


class _View:
    """The finding as the template reads it, plus whether graph B crashed (stage "run") or disagreed."""

    def __init__(self, finding):
        self._f = finding
        self.oracle_status = "crash" if finding.stage == "run" else "inconsistency"

    def __getattr__(self, name):
        return getattr(self._f, name)
