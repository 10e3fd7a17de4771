"""The repository's own tests as seeds of a pull request's scan (dlci.sources.repo_tests does the work).

:func:`repo_test_seeds` finds the head revision's tests of the touched converters (TVM's frontend tests,
onnxscript's OpInfo extensions, the ``.dlci.yml`` ``repo_tests.paths``), runs those that reach the touched
operators in the revision's own environment while recording what enters the frontend's entry points, and returns
the recordings as instances that the scan's targets run and judge like any other (the tests' own assertions are
not the oracle). It spends at most ``budget_s`` seconds: ``repo_tests.share`` of the scan's budget
(:func:`budget_for`, 15 % by default). :func:`add_to_selection` is the scan's step: the seeds join the operators'
own instances (first), and a touched operator with no other material is no longer a test gap when a seed stands
for it.
"""
from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from dlci import cache
from dlci.instance import Instance
from dlci.sources import repo_tests as rt

MAX_SECONDS = 90.0  # never more than this, whatever the budget: the operators' own tests come first


def settings(config) -> rt.Settings:
    """The ``.dlci.yml`` ``repo_tests`` settings of the (base revision's) policy."""
    return rt.Settings.of(getattr(config, "repo_tests", None))


def budget_for(config, scan_budget: float) -> float:
    """Seconds the repository's tests get in a scan of ``scan_budget`` seconds (0: switched off)."""
    share = settings(config).share
    return 0.0 if share <= 0 else min(MAX_SECONDS, share * float(scan_budget))


def repo_test_seeds(repo_root: Path, touched: list, config, env: dict, budget_s: float,
                    progress: Callable[[str], None] = lambda s: None, report: dict | None = None) -> list[Instance]:
    """Instances recorded from the repository's own tests of the ``touched`` converters (dlci.profiles.Touch), run
    at ``repo_root`` (the head revision's checkout) in ``env`` (its environment: dlci.checkout.Checkout.env), within
    ``budget_s`` seconds. ``report`` (when given) receives what was read, chosen, run and kept."""
    repo_root = Path(repo_root)
    out = report if report is not None else {}
    conf = settings(config)
    t0 = time.monotonic()
    if conf.share <= 0 or budget_s <= 0 or not touched:
        out.update(ran=False, why="switched off" if conf.share <= 0 or budget_s <= 0 else "nothing touched")
        return []
    deadline = t0 + budget_s
    wanted = rt.Wanted.of(touched)
    layouts = [rt.LAYOUTS[p] for p in sorted({t.profile for t in touched}) if p in rt.LAYOUTS]
    entries = tuple(dict.fromkeys([e for layout in layouts for e in layout.entries] + list(conf.entries)))
    files = list(dict.fromkeys(f for layout in layouts for f in rt.test_files(repo_root, layout, (), wanted)))
    files += [f for f in rt.test_files(repo_root, rt.Layout(), conf.paths, wanted) if f not in files]
    found: list[Instance] = []
    out.update(ran=True, files=files, budget_seconds=round(budget_s, 1))
    # the OpInfo extensions first: one import and the samples of the touched operators, the most direct material
    for layout in layouts:
        defs = [f for f in layout.opinfo if (repo_root / f).is_file()]
        if not defs or time.monotonic() > deadline - 2:
            continue
        names = rt.mapped_opinfos(repo_root, [f for f in layout.opinfo_map if (repo_root / f).is_file()],
                                  wanted.converters)
        progress(f"repository OpInfos: sampling {', '.join(defs)} for the touched operators"
                 + (f" ({len(names)} named by the test data)" if names else ""))
        share = 0.6 if files and entries else 1.0
        insts, drawn = rt.draw_opinfo(repo_root, defs, names, wanted, env, _share_left(deadline, share), rt.PER_OP)
        out.setdefault("opinfo", []).append({"files": defs, "named": sorted(names), **drawn, "kept": len(insts)})
        found += insts
    if files and entries and time.monotonic() < deadline - 2:
        chosen, seen = rt.choose_tests(repo_root, files, wanted, conf.max_tests)
        out["tests"] = {"seen": seen, "chosen": [{"test": c.nodeid, "why": c.why} for c in chosen]}
        if chosen:
            progress(f"repository tests: {len(chosen)} of {seen['tests_seen']} test functions in {len(files)} "
                     f"file(s) reach the touched operators; recording their models "
                     f"({max(0.0, deadline - time.monotonic()):.0f} s)")
            mark = _conftest_mark(repo_root, chosen)
            with tempfile.TemporaryDirectory(prefix="dlci-repo-tests-") as td:
                prefix = str(Path(td) / "records")
                nodeids = [c.nodeid for c in chosen]
                if cache.find(mark) is not None:  # these conftest.py files broke every test here before
                    progress("repository tests: without the repository's conftest.py files (they broke every "
                             "chosen test in an earlier scan)")
                    ran = rt.run_pytest(repo_root, nodeids, entries, env, _share_left(deadline, 1.0), prefix,
                                        conftest=False)
                    ran["conftest_known_broken"] = True
                    records, plugin = rt.read_records(prefix)
                else:
                    ran = rt.run_pytest(repo_root, nodeids, entries, env, _share_left(deadline, 1.0), prefix)
                    records, plugin = rt.read_records(prefix)
                if not records and rt.setup_broken(ran) and not ran.get("conftest_known_broken") and \
                        time.monotonic() < deadline - 5:
                    # the tests' own fixtures are not needed to build their models: again without conftest.py
                    progress("repository tests: every chosen test errored before its model was recorded; "
                             "again without the repository's conftest.py files")
                    prefix += "-noconftest"
                    first, ran = ran, rt.run_pytest(repo_root, nodeids, entries, env, _share_left(deadline, 1.0),
                                                    prefix, conftest=False)
                    ran["with_conftest"] = first
                    records, plugin = rt.read_records(prefix)
                    if records:  # the next scan of this repository goes without them at once
                        (cache.root() / mark).parent.mkdir(parents=True, exist_ok=True)
                        (cache.root() / mark).write_text(str(first.get("tail", ""))[-2000:] or "setup errors\n")
            insts, dropped = rt.record_instances(records, wanted, {c.nodeid: c for c in chosen})
            out["pytest"] = {**ran, "records": len(records), "kept": len(insts), "dropped": dropped,
                             "plugin_skipped": (plugin or {}).get("skipped", {})}
            found += insts
    seeds = rt.capped(found, wanted)
    out.update(instances=len(seeds), operators=sorted({i.op for i in seeds}),
               seconds=round(time.monotonic() - t0, 2))
    if seeds or out.get("tests") or out.get("opinfo"):
        progress(f"repository tests: {len(seeds)} seed instance(s) of {', '.join(out['operators']) or '-'} "
                 f"({out['seconds']:.0f} s)")
    return seeds


def _conftest_mark(repo_root: Path, chosen: list) -> str:
    """The cache entry saying that the conftest.py files pytest loads for the chosen tests (every one from the
    repository's root down to each test's folder, by path and content) broke them all in this environment."""
    h = hashlib.sha1(sys.version.encode())
    for folder in sorted({(repo_root / c.nodeid.split("::", 1)[0]).parent for c in chosen}):
        for up in [folder, *folder.parents]:
            conftest = up / "conftest.py"
            if conftest.is_file():
                h.update(str(conftest.relative_to(repo_root)).encode() + b"\0" + conftest.read_bytes())
            if up == repo_root:
                break
    return f"repo-tests/conftest-broken-{h.hexdigest()[:16]}"


def _share_left(deadline: float, share: float) -> float:
    return max(1.0, share * (deadline - time.monotonic()))


def add_to_selection(pull, chosen, revisions) -> list[Instance]:
    """The scan's step (after the head checkout is prepared, before "nothing to test" is decided): the seeds of the
    repository's tests join ``chosen.instances`` (first), routed like the operators' own instances; a touched
    operator a seed stands for is no longer without material. Returns the seeds kept."""
    from dlci import operators
    budget = budget_for(pull.config, pull.options.budget)
    if budget <= 0 or not pull.analysis.touches or not chosen.chosen:
        return []
    head = revisions.prepare_head()
    report = pull.pr.setdefault("repo_tests", {})
    seeds = repo_test_seeds(head.path, pull.analysis.touches, pull.config, revisions.head_env, budget,
                            progress=pull.say, report=report)
    gone = getattr(revisions, "skip_files", set())  # changed files that do not import at head: nothing to seed
    lost = {c for t in pull.analysis.touches if t.file in gone for c in operators.canonical(t.operator, t.namespace)}
    kept = {c for t in pull.analysis.touches if t.file not in gone
            for c in operators.canonical(t.operator, t.namespace)}
    seeds = [i for i in seeds if chosen.reaches(i)
             and (operators.instance_ops(i.op) & kept or not operators.instance_ops(i.op) & lost)]
    report["routed"] = len(seeds)
    if not seeds:
        return []
    have = {i.id for i in chosen.instances}
    chosen.instances = [i for i in seeds if i.id not in have] + list(chosen.instances)
    covered = {c for i in chosen.instances for c in operators.instance_ops(i.op)}
    without = [c for c in pull.pr.get("operators_without_material") or [] if c not in covered]
    if without:
        pull.pr["operators_without_material"] = without
    else:
        pull.pr.pop("operators_without_material", None)
    pull.pr["instances_selected"] = len(chosen.instances)
    if chosen.nothing is not None and chosen.untested_change:  # a test gap the seeds fill (not a broken import)
        chosen.nothing, chosen.untested_change = None, False
        pull.pr.pop("test_gap", None)
    return seeds
