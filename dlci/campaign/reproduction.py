"""The reproduce stage of a campaign: each finding's standalone reproducer (and its test in the target repository's
style) rendered and run alone, falling back to other instances of the finding before it is dropped; the reported
findings renumbered F001... What the checks owe the budget (:func:`reproducers_owed`) is what the other stages leave
them.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from dlci.campaign.options import RunOptions
from dlci.campaign.state import Campaign, add_phase
from dlci.findings import Finding

# a reproducer run alone in a child of a warm interpreter (dlci.findings.warm) costs what its test costs alone plus
# this much (the fork, the script's inputs and fp64 reference, its log): 133 checks of a broad run took 0.5 worker
# seconds each beyond their tests' 0.1 (a fresh interpreter importing torch and the target: 4-12 s,
# benchmarks/repro_checks.py)
REPRO_CHECK_OVERHEAD = 0.45
FRESH_CHECK_SECONDS = 8.0  # a reproducer checked in a fresh interpreter (a device target's)
RENDER_SECONDS = 0.1  # rendering one reproducer (and its test in the repository's style), in dlci's own process
CHECK_SHARE = 0.7  # of the time left before the hard deadline that owed reproducer checks may take before testing
# stops (the rest: confirmations, reduction, the report)
FALLBACKS = 2  # larger instances a finding's reproducer falls back to before the finding is dropped
REPRO_TIMEOUT = 600.0  # seconds a reproducer may run alone
MIN_CHECK_SECONDS = 10.0  # a check that cannot get this long before the deadline is not started


@dataclass(frozen=True)
class FollowUp:
    """A second check some findings get from the same worker right after their reproducer reproduced alone (a scan's:
    each new finding's on the base revision). Their checks come first and may start until ``until``, later than the
    others'. The follow-up bounds itself: near the deadline a new finding is still checked on head, where it may be
    dropped for not reproducing, rather than leave the time to the others' checks (a real scan left 4 new findings
    unchecked, for want of room for both checks, while 7 old ones were checked after them)."""
    wants: Callable[[Finding], bool]
    run: Callable[[Finding], None]
    until: float | None


def reproducers_owed(campaign: Campaign, signatures: Iterable[str], workers: int) -> float:
    """Wall seconds rendering and checking the reproducers of these signatures will take, the checks as many at once
    as there are workers: each check costs what its test took alone (``Campaign.test_seconds_alone``) plus a warm
    interpreter's overhead: a TVM test that compiles for 2 s owes more than an ONNX Runtime one of 10 ms."""
    signatures = list(signatures)

    def check(sig: str) -> float:
        target = campaign.targets.get(sig.split("|", 1)[0])
        # a device target's reproducer runs in a fresh interpreter, one at a time after the others
        fresh = FRESH_CHECK_SECONDS * max(1, workers) if getattr(target, "on_accelerator", False) else 0.0
        return REPRO_CHECK_OVERHEAD + fresh + campaign.test_seconds_alone.get(sig, 0.0)
    return len(signatures) * RENDER_SECONDS + sum(map(check, signatures)) / max(1, workers)


def reproduce(findings: list[Finding], campaign: Campaign, options: RunOptions, *, env: dict | None = None,
              until: float | None = None, hard_until: float | None = None,
              follow_up: FollowUp | None = None) -> tuple[list[Finding], list[dict]]:
    """Render each finding's standalone reproducer (and its test in the target repository's style) and, unless
    told not to, run it alone in a fresh interpreter (``env``: the revision's environment), in the order given. A
    reproducer that does not reproduce falls back to the unreduced instance, then to other instances of the finding,
    before the finding is dropped (it then comes back in the second list, for triage, its scripts moved to
    repro/unreproduced/). A check that would start after ``until``, or that ``hard_until`` cuts short, leaves the
    finding unchecked (``repro_checked`` None): it stays. The findings ``follow_up`` wants are checked first and
    followed up (:class:`FollowUp`). The reported findings are renumbered F001... and their scripts re-rendered."""
    from dlci.findings.repro import check_repro, test_env, why_not_reproduced
    from dlci.findings.warm import WarmPool
    out = options.out
    (out / "repro").mkdir(parents=True, exist_ok=True)
    paths = {}
    seen: set[str] = set()
    t0 = time.monotonic()
    for f in findings:
        while f.id in seen:  # the two parts of a split finding: each needs a script of its own
            f.id += "b"
        seen.add(f.id)
        try:
            paths[f.id] = _render(f, campaign, out)
            f.repro = str(paths[f.id].relative_to(out))
        except Exception as e:  # a recipe the renderer cannot express: reported, never fatal
            f.repro, f.repro_checked = "", False
            f.message += f"\n(dlci could not render a reproducer: {type(e).__name__}: {e})"
        _render_test_style(f, campaign, options)
    add_phase(campaign, "render", t0)
    unreproduced: list[dict] = []
    if options.check_repros and not campaign.interrupted:
        def followed(finding: Finding) -> bool:
            return follow_up is not None and follow_up.wants(finding)

        def run_alone(path: Path) -> bool | None:
            """check_repro within the budget: None when the budget, not the reproducer, ended the run."""
            limit = REPRO_TIMEOUT if hard_until is None else min(REPRO_TIMEOUT, hard_until - time.monotonic())
            if limit < MIN_CHECK_SECONDS:
                return None
            t0 = time.monotonic()
            ok = check_repro(path, env=env, timeout=limit, warm=warm)
            return None if not ok and limit < REPRO_TIMEOUT and time.monotonic() - t0 >= limit - 1 else ok

        def check(finding: Finding) -> None:
            last = follow_up.until if followed(finding) else until
            if finding.id not in paths or (last is not None and time.monotonic() > last):
                return
            finding.repro_checked = run_alone(paths[finding.id])
            for alternative in _alternatives(finding, campaign)[:FALLBACKS]:
                if finding.repro_checked is not False or (last is not None and time.monotonic() > last):
                    break
                options.progress(f"reproducer {finding.repro} does not reproduce alone: trying instance "
                                 f"{alternative}")
                tried = finding.instance_id
                finding.instance_id = alternative
                old = paths[finding.id]
                paths[finding.id] = _render(finding, campaign, out)
                if old != paths[finding.id]:
                    old.unlink(missing_ok=True)
                finding.repro = str(paths[finding.id].relative_to(out))
                _render_test_style(finding, campaign, options)
                finding.repro_checked = run_alone(paths[finding.id])
                finding.extra["reproducer_fallback"] = (f"the reproducer of instance {tried} did not reproduce alone; "
                                                        f"this one uses instance {alternative}")
            state = {True: "reproduces", False: "does NOT reproduce alone", None: "not run (budget)"}
            options.progress(f"reproducer {finding.repro}: {state[finding.repro_checked]}")
            if finding.repro_checked and followed(finding):
                follow_up.run(finding)

        def check_test_style(finding: Finding) -> None:
            from dlci.findings.test_style import check_test
            if not finding.test_style_repro or finding.repro_checked is None or \
                    (until is not None and time.monotonic() > until):
                return
            # bounded like the standalone checks: what comes after (the base checks of the new findings) keeps its time
            limit = REPRO_TIMEOUT if hard_until is None else min(REPRO_TIMEOUT, hard_until - time.monotonic())
            if limit < MIN_CHECK_SECONDS:
                return
            t0 = time.monotonic()
            ok = check_test(out / finding.test_style_repro, env=env, timeout=limit)
            cut = not ok and limit < REPRO_TIMEOUT and time.monotonic() - t0 >= limit - 1  # the budget, not the test
            finding.test_style_checked = None if cut else ok

        # as many at once as there were workers; a device target's reproducers one at a time, after the others: alone
        # on the device, no other test's memory or timing beside them
        on_device = {id(f) for f in findings if getattr(campaign.targets.get(f.target), "on_accelerator", False)}
        order = sorted((f for f in findings if id(f) not in on_device), key=lambda f: not followed(f))
        t0 = time.monotonic()
        with WarmPool(test_env(env), max(1, options.workers)) as warm, \
                ThreadPoolExecutor(max(1, options.workers)) as pool:
            list(pool.map(check, order))
        warm = None  # a device's reproducer runs in a fresh interpreter: nothing of the warm ones on the device
        for f in findings:
            if id(f) in on_device:
                check(f)
        add_phase(campaign, "check", t0)
        t0 = time.monotonic()
        with ThreadPoolExecutor(max(1, options.workers)) as pool:
            # the standalone script alone decides whether a finding is reported: every finding's is checked first,
            # the tests in the repository's style with the time that is left
            from dlci.findings.test_style import pytest_available
            if pytest_available():
                list(pool.map(check_test_style, findings))
        add_phase(campaign, "check_test_style", t0)
        unreproduced = [f.to_dict() for f in findings if f.repro_checked is False]
        findings = [f for f in findings if f.repro_checked is not False]
    for f in unreproduced:  # their scripts (and test-style tests) stay for triage, under a name that says so
        log = (out / f["repro"]).with_suffix(".log") if f.get("repro") else None
        if log is not None and log.is_file():
            f["not_reproduced_because"] = why_not_reproduced(log.read_text(errors="replace"))
        for key in ("repro", "test_style_repro"):
            if f[key] and (out / f[key]).exists():
                src = out / f[key]
                dest = out / "repro" / "unreproduced" / src.name
                dest.parent.mkdir(exist_ok=True)
                src.rename(dest)
                if src.with_suffix(".log").exists():
                    src.with_suffix(".log").rename(dest.with_suffix(".log"))
                f[key] = str(dest.relative_to(out))
    # scripts are named by id: set every old one aside first, so that a new name never lands on a script (or log)
    # another finding has not been renumbered from yet
    # (a finding that keeps its id keeps its scripts: rendering again costs an export per torch-origin finding)
    moving = [(finding, f"F{n:03d}") for n, finding in enumerate(findings, start=1) if finding.id != f"F{n:03d}"]
    aside = [_set_aside(finding, out) for finding, _ in moving]
    for (finding, new_id), old in zip(moving, aside):
        _renumber(finding, new_id, campaign, options, old)
    return findings, unreproduced


def _set_aside(finding: Finding, out: Path) -> dict[str, Path]:
    """The finding's scripts and their logs renamed out of the way: key ("repro" / "test_style_repro") -> old path."""
    moved = {}
    for key in ("repro", "test_style_repro"):
        rel = getattr(finding, key)
        if rel and (out / rel).exists():
            for path in (out / rel, (out / rel).with_suffix(".log")):
                if path.exists():
                    path.rename(path.with_name(f".renumber-{finding.id}-{path.name}"))
            moved[key] = out / rel
    return moved


def _alternatives(finding: Finding, campaign: Campaign) -> list[str]:
    """Instances a finding's reproducer may fall back to: the one it was reduced from, then its other instances
    (smallest first)."""
    first = [finding.extra["unreduced_instance"]] if finding.extra.get("unreduced_instance") else []
    rest = sorted((i for i in finding.instances if i not in first and i != finding.instance_id),
                  key=lambda i: campaign.instances[i].size())
    return [i for i in first + rest if i != finding.instance_id and i in campaign.instances]


def _renumber(finding: Finding, new_id: str, campaign: Campaign, options: RunOptions,
              old: dict[str, Path]) -> None:
    """Give a finding its final id; its scripts name the id, so they are rendered again under the new name (their
    old files, set aside by _set_aside, are dropped; their logs follow)."""
    out = options.out
    old_id, finding.id = finding.id, new_id

    def settle(key: str, new_path: Path) -> None:
        if key not in old:
            return
        was = old[key]
        aside = was.with_name(f".renumber-{old_id}-{was.name}")
        if new_path.exists():
            aside.unlink(missing_ok=True)
        elif aside.exists():  # not rendered again (a renderer that gave up): the old script stays
            aside.rename(new_path)
        log = was.with_suffix(".log")
        log = log.with_name(f".renumber-{old_id}-{log.name}")
        if log.exists():
            log.rename(new_path.with_suffix(".log"))

    if finding.repro:
        new_path = _render(finding, campaign, out)
        settle("repro", new_path)
        finding.repro = str(new_path.relative_to(out))
    if finding.test_style_repro:
        _render_test_style(finding, campaign, options)
        settle("test_style_repro", out / finding.test_style_repro)


def _render(finding: Finding, campaign: Campaign, out: Path) -> Path:
    from dlci.findings.repro import render
    return render(campaign.targets[finding.target], finding, campaign.instances[finding.instance_id], out / "repro")


def _render_test_style(finding: Finding, campaign: Campaign, options: RunOptions) -> None:
    """The reproducer again, as a test in the target repository's own style (never fatal: the script is what
    counts)."""
    from dlci.findings.repro.checks import is_hard_crash
    from dlci.findings.test_style import render_test
    target = campaign.targets[finding.target]
    if is_hard_crash(finding.symptom or "") and finding.stage in ("reference", "model"):
        # that renderer builds the model and evaluates its reference in dlci's own process: what killed or hung the
        # worker there (ONNX Runtime on an exported attention with no rows: SIGFPE) would kill or hang the scan
        finding.test_style_repro, finding.test_style_checked = "", None
        options.progress(f"no test-style reproducer for {finding.id}: it would build the model in dlci's own "
                         f"process, where the worker's ended in {finding.symptom}")
        return
    try:
        path = render_test(finding, campaign.instances[finding.instance_id], options.out / "repro" / "tests",
                           style=target.test_style, form=target.form)
    except Exception as e:
        finding.test_style_repro, finding.test_style_checked = "", None
        options.progress(f"no test-style reproducer for {finding.id}: {type(e).__name__}: {e}")
        return
    if path is not None:
        finding.test_style = target.test_style
        finding.test_style_repro = str(path.relative_to(options.out))
