"""Reproducers of equivalence-rule findings: the rule's graph functions and every helper they use (their source,
pasted by dlci.rules.source), the instance's model code and dlci's comparison, in one standalone script that needs
the framework under test but not dlci (exit 1 while graph A and graph B still disagree, 0 once they agree)."""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from dlci.findings.repro import template_env
from dlci.findings.repro.checks import compare_source, ignored_for, skip_values_for
from dlci.findings.repro.literals import array_code, message_key
from dlci.instance import Instance
from dlci.rules.base import CATEGORIES, Rule
from dlci.rules.case import KerasCase, TorchCase
from dlci.rules.registry import get_rule
from dlci.rules.runner import case_code, framework_imports, model_code
from dlci.rules.source import SourceError, standalone_source


def _name(ref) -> str:
    return ref.rpartition(":")[2] if isinstance(ref, str) else ref.__name__


def render_rule_text(rule: Rule, inst: Instance, finding) -> str:
    """The reproducer's text for a finding of ``rule`` on ``inst``."""
    bundle = standalone_source(TorchCase if rule.library == "torch" else KerasCase, rule.graph_a_fn, rule.graph_b_fn)
    imports = _import_block(["import sys"] + framework_imports(rule.library).splitlines() + bundle.imports)
    text = template_env().get_template("rules/repro.py.j2").render(
        f=_View(finding), rule=rule, category=CATEGORIES[rule.category], inst=inst,
        imports=imports, inputs=[array_code(x) for x in inst.input_arrays()],
        call_json=json.dumps(inst.call, default=str), params_json=json.dumps(inst.params, default=str),
        model_code=model_code(inst), rule_code=bundle.code.strip(), modules=", ".join(bundle.modules),
        case_code=case_code(inst), graph_a=_name(rule.graph_a_fn), graph_b=_name(rule.graph_b_fn),
        compare_code=compare_source(),
        skip_values=repr(skip_values_for(inst)) if skip_values_for(inst) else "set()",
        ignore=repr(ignored_for(inst)) if ignored_for(inst) else "set()", exact=repr(bool(rule.exact)),
        message_key=message_key(finding.message))
    _check_names(text)
    return text


def _import_block(lines: list[str]) -> str:
    """Import lines, each once: the standard library's, then the frameworks'."""
    lines = sorted({ln for ln in lines if ln.strip()}, key=lambda ln: (ln.startswith("from "), ln))
    std = [ln for ln in lines if ln.split()[1].split(".")[0] in sys.stdlib_module_names]
    return "\n".join(std) + "\n\n" + "\n".join(ln for ln in lines if ln not in std)


def render_rule_repro(finding, inst: Instance, repro_dir: Path) -> Path:
    text = render_rule_text(get_rule(finding.target), inst, finding)
    safe_op = re.sub(r"[^A-Za-z0-9_]+", "_", finding.operator).strip("_")
    path = repro_dir / f"{finding.id}_{finding.target.replace('.', '_')}_{safe_op}.py"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


def _check_names(text: str) -> None:
    """Every module-level name of the script is bound once (imports may repeat): a pasted helper must not shadow
    the model code, the comparison or another helper."""
    seen: dict[str, str] = {}
    for stmt in ast.parse(text).body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            names = [stmt.name]
        elif isinstance(stmt, ast.Assign):
            names = [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        else:
            continue
        for n in names:
            if n in seen:
                raise SourceError(f"reproducer: {n!r} is bound at line {seen[n]} and again at line {stmt.lineno}")
            seen[n] = str(stmt.lineno)


class _View:
    """The finding as the template reads it, plus whether graph B crashed (stage "run") or disagreed."""

    def __init__(self, finding):
        self._f = finding
        self.oracle_status = "crash" if finding.stage == "run" else "inconsistency"

    def __getattr__(self, name):
        return getattr(self._f, name)
