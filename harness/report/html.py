"""``index.html``: the run at a glance, and one ``timeline.html`` per trial folder.

The index shows the overall verdict, the invariants over the campaign, where
the kills landed, the self-check and every trial; each trial page shows the
spec, the one command that replays it, the verdicts with their evidence and
the timeline of its lives (``harness.report.timeline``). The four outcomes of
a verdict have badges of their own (pass green, fail red, unknown amber as
"could not judge", not-judged grey); the invariants table counts each apart,
and says to how many trials each applied (a pass with nothing to judge did not),
and the run's badge is INTERRUPTED (beside FAIL if a trial failed) over FAIL over
COULD NOT JUDGE over INCOMPLETE (a merge with shards missing) over PASS.

Contract: the pages describe what the checkers decided and never decide
anything; every string that comes from data is escaped; the files open
offline (inline CSS and a few lines of inline JS, nothing fetched). Reading a
trial's files never stops the report: a trial page that cannot be built says
why, and a page that cannot be written is simply not linked.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.agent.plan import plan_id
from harness.chaos.keep import TRIALS_FILE
from harness.chaos.trial import TrialResult
from harness.check.invariants import OUTCOMES, TITLES, Verdict
from harness.report.model import (
    SelfCheckRow,
    applied,
    count_verdicts,
    never_applied,
    trials_with_verdict,
)
from harness.report.tables import fault_rows, invariant_catches, window_counts
from harness.report.timeline import Timeline, read_timeline, render_timeline
from harness.words import many

__all__ = [
    "MAX_PASSING_PAGES",
    "TRIAL_PAGE",
    "broken_ops",
    "write_index_html",
    "write_trial_page",
]

TRIAL_PAGE = "timeline.html"
MAX_PASSING_PAGES = 200
"""Passing trials that get a page; failed and unknown trials always get one."""

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;
 max-width:1200px;padding:0 1em;color:#1d2939}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.6em 0 .5em;
 border-bottom:1px solid #d0d5dd}h3{font-size:1em;margin:0;padding:.4em .6em;background:#f2f4f7}
table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #d0d5dd;padding:.2em .5em;
 text-align:left;vertical-align:top}th{background:#f2f4f7}td.n{text-align:right}
code,pre,.tl{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#f2f4f7;padding:.5em;white-space:pre-wrap;word-break:break-all}
.badge{display:inline-block;padding:.05em .5em;border-radius:3px;font-weight:600;color:#fff}
.badge.pass{background:#067647}.badge.fail{background:#b42318}.badge.unknown{background:#b54708}
.badge.not-judged{background:#667085}.badge.incomplete,.badge.interrupted{background:#b54708}
tr.fail td{background:#fef3f2}tr.unknown td{background:#fffaeb}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em;margin:.5em 0}
dl.facts dt{color:#475467}dl.facts dd{margin:0}
.problem{background:#fef3f2;border-left:4px solid #b42318;padding:.4em .6em}
.note{background:#fffaeb;border-left:4px solid #b54708;padding:.4em .6em}
.legend .r{display:inline-block;padding:0 .4em;margin-right:.4em;border-left:4px solid}
section.life{border:1px solid #d0d5dd;margin:.8em 0}section.life.killed{border-color:#b42318}
section.life.killed h3{background:#fee4e2}.sum{font-weight:400;color:#475467;margin-left:.5em}
ol.tl{list-style:none;margin:0;padding:0}
ol.tl li.lanes{display:block;padding:.2em .5em}table.lanes{border-collapse:collapse;width:100%}
table.lanes td,table.lanes th{border:1px solid #eaecf0;padding:.1em .4em;vertical-align:top}
ol.tl li{display:grid;grid-template-columns:5.5em 7.5em 8em 1fr;gap:0 .5em;padding:.1em .5em;
 border-left:4px solid transparent}
.at{color:#98a2b3}.tag{color:#475467}.op{font-weight:600}.tx{white-space:pre-wrap}
.r.kill{background:#fee4e2;border-left-color:#b42318;color:#7a271a;font-weight:600}
.r.verify{background:#fef0c7;border-left-color:#dc6803}
.r.ledger{background:#d1e9ff;border-left-color:#1570ef}
.r.ok .tx{color:#067647}.r.failed .tx{color:#b42318}.r.ok{border-left-color:#75e0a7}
.r.failed{border-left-color:#fda29b}.r.event{color:#475467;border-left-color:#98a2b3}
.r.quiet{color:#98a2b3}
.filter{margin:.4em 0}.filter label{margin-right:.8em}
ol.failures{padding-left:1.4em}ol.failures li{margin:.6em 0}
ol.failures ul{margin:.2em 0;padding-left:1.2em}
.replay{display:flex;gap:.4em;align-items:flex-start;margin:.2em 0}
.replay code{flex:1;background:#f2f4f7;padding:.3em .5em;white-space:pre-wrap;word-break:break-all}
.replay button,.pager button{font:inherit;padding:.1em .6em;cursor:pointer}
.pager{margin:.4em 0}
.mark{outline:2px solid #b42318;outline-offset:-2px}tr.mark td{background:#fee4e2}
.broke{color:#b42318;font-weight:600}
"""

# Filters the trial table by text and status, a page of rows at a time, and copies a
# replay command; plain JS, nothing fetched, so it works from a file:// address too.
# Without JS, every trial is listed.
_INDEX_JS = """
const PAGE=100,q=document.getElementById('q'),info=document.getElementById('shown');
const rows=[...document.querySelectorAll('#trials tbody tr')];let page=0,hits=rows;
function status(){return document.querySelector('input[name=status]:checked').value;}
function apply(){const t=q.value.toLowerCase(),s=status();
hits=rows.filter(r=>(s==='all'||r.dataset.status===s)&&r.textContent.toLowerCase().includes(t));
const pages=Math.max(1,Math.ceil(hits.length/PAGE));page=Math.min(page,pages-1);
for(const r of rows)r.hidden=true;
hits.slice(page*PAGE,(page+1)*PAGE).forEach(r=>{r.hidden=false;});
const a=hits.length?page*PAGE+1:0,b=Math.min(hits.length,(page+1)*PAGE);
info.textContent=`trials ${a}-${b} of ${hits.length} shown (page ${page+1} of ${pages})`;
document.getElementById('prev').disabled=page===0;
document.getElementById('next').disabled=page>=pages-1;}
q.addEventListener('input',()=>{page=0;apply();});
for(const r of document.querySelectorAll('input[name=status]'))
r.addEventListener('change',()=>{page=0;apply();});
document.getElementById('prev').addEventListener('click',()=>{page--;apply();});
document.getElementById('next').addEventListener('click',()=>{page++;apply();});
apply();
for(const b of document.querySelectorAll('button.copy'))b.addEventListener('click',()=>{
const text=b.previousElementSibling.textContent,done=()=>{b.textContent='copied';};
const fallback=()=>{const t=document.createElement('textarea');t.value=text;
document.body.appendChild(t);t.select();document.execCommand('copy');t.remove();done();};
if(navigator.clipboard)navigator.clipboard.writeText(text).then(done,fallback);else fallback();});
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _page(title: str, body: str, script: str = "") -> str:
    js = f"<script>{script}</script>" if script else ""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
        f"<body>{body}{js}</body></html>\n"
    )


_BADGE_TEXT = {"unknown": "COULD NOT JUDGE"}
"""A badge's text where it is not the status in capitals."""


def _badge(status: str, text: str = "") -> str:
    """A status as a coloured badge: pass green, fail red, unknown amber, not-judged grey;
    its text the status in capitals unless given."""
    text = text or _BADGE_TEXT.get(status, status.upper())
    return f'<span class="badge {_e(status)}">{_e(text)}</span>'


def _table(head: Iterable[str], rows: Iterable[str], *, table_id: str = "") -> str:
    ths = "".join(f"<th>{_e(h)}</th>" for h in head)
    ident = f' id="{_e(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _link(run_dir: Path, result: TrialResult) -> str | None:
    """The trial page's address relative to the index, or None outside the run folder."""
    try:
        relative = result.directory.relative_to(run_dir)
    except ValueError:
        return None
    return quote(f"{relative.as_posix()}/{TRIAL_PAGE}", safe="/@+")


# -- the index ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Overview:
    seed: str
    runtime: str
    trials: int
    failed: int
    unknown: int
    kills: int
    passed: bool
    missing_shards: tuple[str, ...] = ()
    interrupted: bool = False

    @property
    def status(self) -> str:
        """The run's badge: an interrupted run is interrupted, whatever completed; a failure
        outranks an unknown; a run with shards missing is incomplete; else the campaign's
        own verdict (which also counts the self-check)."""
        if self.interrupted:
            return "interrupted"
        if self.failed:
            return "fail"
        if self.unknown:
            return "unknown"
        if self.missing_shards:
            return "incomplete"
        return "pass" if self.passed else "fail"


def _overview(run_dir: Path, results: list[TrialResult], checks: list[SelfCheckRow]) -> _Overview:
    """From ``summary.json`` (the campaign's own numbers) where present, else from the results."""
    seeds = sorted({r.spec.seed for r in results})
    runtimes = sorted({r.spec.runtime for r in results})
    failed = sum(r.status == "fail" for r in results)
    computed: dict[str, Any] = {
        "seed": seeds[0] if len(seeds) == 1 else "trial seeds vary",
        "runtime": ", ".join(runtimes) or "?",
        "trials": len(results),
        "failed": failed,
        "unknown": sum(r.status == "unknown" for r in results),
        "kills": sum(r.kills for r in results),
        "passed": failed == 0
        and not any(r.status == "unknown" for r in results)
        and all(c.as_expected for c in checks),
    }
    missing: tuple[str, ...] = ()
    interrupted = False
    try:
        summary = json.loads((run_dir / "summary.json").read_text("utf-8"))
    except (OSError, ValueError):
        summary = None
    if isinstance(summary, dict):
        for key in computed:
            value = summary.get(key)
            wanted = bool if key == "passed" else int if key != "runtime" else str
            if isinstance(value, wanted) and (wanted is bool or not isinstance(value, bool)):
                computed[key] = value
        shards = summary.get("missing_shards")
        if isinstance(shards, list):
            missing = tuple(str(shard) for shard in shards)
        interrupted = summary.get("interrupted") is True
    return _Overview(
        str(computed["seed"]),
        str(computed["runtime"]),
        int(computed["trials"]),
        int(computed["failed"]),
        int(computed["unknown"]),
        int(computed["kills"]),
        bool(computed["passed"]),
        missing,
        interrupted,
    )


def _header(run_dir: Path, o: _Overview, results: list[TrialResult]) -> str:
    kinds = Counter(r.spec.kind for r in results)
    passing = o.trials - o.failed - o.unknown
    facts = [
        ("seed", _e(o.seed)),
        ("runtime under test", _e(o.runtime)),
        (
            "trials",
            f"{o.trials}: {passing} pass, {o.failed} fail, {o.unknown} unknown"
            + (
                f" ({_e(', '.join(f'{n} {k}' for k, n in sorted(kinds.items())))})" if kinds else ""
            ),
        ),
        ("kills", str(o.kills)),
        ("run folder", f"<code>{_e(run_dir)}</code>"),
    ]
    if o.missing_shards:
        missing = ", ".join(o.missing_shards)
        facts.insert(3, ("missing shards", f"{_e(missing)}: this is not the whole campaign"))
    badges = _badge(o.status)
    if o.interrupted:
        facts.insert(
            0,
            (
                "interrupted",
                f"after {o.trials} completed trials: this is not the "
                "whole campaign, and the report holds only what completed",
            ),
        )
        badges += (" " + _badge("fail")) if o.failed else ""
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    return f'<h1>chaos run {badges}</h1><dl class="facts">{dl}</dl>'


def _invariants(results: list[TrialResult]) -> str:
    counts = count_verdicts(results, TITLES)
    titles = dict(TITLES)
    for result in results:
        for verdict in result.verdicts:
            titles.setdefault(verdict.invariant, verdict.title)
    rows = []
    for key, c in counts.items():
        cls = "fail" if c["fail"] else "unknown" if c["unknown"] else ""
        cells = "".join(f'<td class="n">{c[outcome]}</td>' for outcome in OUTCOMES)
        cells += f"<td>applied to {applied(c)} of {trials_with_verdict(c)} trials</td>"
        rows.append(f'<tr class="{cls}"><td>{_e(key)}</td><td>{_e(titles[key])}</td>{cells}</tr>')
    idle = never_applied(counts)
    note = (
        f'<p class="note">Applied to no trial (every pass had nothing to judge): '
        f"{_e(', '.join(idle))}</p>"
        if idle
        else ""
    )
    return "<h2>Invariants</h2>" + note + _table(("", "invariant", *OUTCOMES, "applied"), rows)


def _coverage(results: list[TrialResult]) -> str:
    reached = Counter(point.split(" ")[0] for r in results for point in r.reached)
    rows = [
        f'<tr><td>random-time kill in window <b>{_e(w)}</b></td><td class="n">{n}</td></tr>'
        for w, n in window_counts(results)
    ]
    rows += [
        f'<tr><td>failpoint <code>{_e(p)}</code></td><td class="n">{n}</td></tr>'
        for p, n in sorted(reached.items())
    ]
    return "<h2>Where the kills landed</h2>" + _table(("kill", "count"), rows)


def _self_check(run_dir: Path, checks: list[SelfCheckRow], pages: set[Path]) -> str:
    if not checks:
        return "<h2>Self-check</h2><p>not run (each broken runtime must be caught)</p>"
    rows = []
    for check in checks:
        cls = "" if check.as_expected else "fail"
        outcome = _self_check_badge(check)
        replay = ""
        if check.caught is not None:
            link = _link(run_dir, check.caught) if check.caught.directory in pages else None
            name = _e(check.caught.spec.trial_id)
            trial = f'<a href="{_e(link)}">{name}</a>' if link else name
            replay = f"{trial}<pre>{_e(check.caught.spec.replay_command())}</pre>"
        rows.append(
            f'<tr class="{cls}"><td><code>{_e(check.name)}</code></td>'
            f"<td>{_e(check.mistake)}</td><td>{_e(', '.join(check.expected))}</td>"
            f'<td class="n">{check.trials}</td><td>{outcome} '
            f"{_e(check.outcome)}</td><td>{replay}</td></tr>"
        )
    return "<h2>Self-check: each broken runtime must be caught</h2>" + _table(
        ("broken runtime", "mistake", "expected", "trials", "outcome", "caught in (replay)"), rows
    )


def _self_check_badge(check: SelfCheckRow) -> str:
    """What the self-check asks of a broken runtime: was it caught? (Green means caught, as
    it must be: the broken runtime did not pass.)"""
    if check.not_applicable is not None:
        return _badge("not-judged", "NOT APPLICABLE")
    if check.caught is None:
        return _badge("fail", "NOT CAUGHT")
    if not check.as_expected:
        return _badge("fail", "CAUGHT WITHOUT ITS FAULT")
    return _badge("pass", "CAUGHT")


def _every_invariant_fails(checks: list[SelfCheckRow]) -> str:
    """Per invariant, the broken runtimes and mutations it caught: each must have one."""
    if not checks:
        return ""
    rows = []
    for row in invariant_catches(checks):
        caught = _e(", ".join(row.caught)) if row.caught else _badge("fail", "NOTHING CAUGHT BY IT")
        rows.append(
            f'<tr class="{"" if row.caught else "fail"}"><td>{_e(row.key)}</td>'
            f"<td>{_e(row.title)}</td><td>{caught}</td><td>{_e(', '.join(row.alone) or '—')}</td>"
            "</tr>"
        )
    return "<h2>Self-check: every invariant can fail</h2>" + _table(
        ("", "invariant", "caught", "failing alone in"), rows
    )


def _faults(results: list[TrialResult]) -> str:
    """The faults injected, by kind of trial, as the console prints them: for one runtime."""
    runtimes = {r.spec.runtime for r in results}
    if len(runtimes) != 1:
        return ""
    try:
        fault_table = fault_rows(results, runtimes.pop())
    except Exception:  # a runtime this install does not know: its trials still show
        return ""
    rows = []
    for row in fault_table:
        if row.not_applicable is not None:
            counts = f'<td colspan="3">not applicable: {_e(row.not_applicable)}</td>'
        else:
            counts = "".join(
                f'<td class="n">{n}</td>' for n in (row.exhaustive, row.random, row.failed)
            )
        cls = "fail" if row.failed else ""
        rows.append(
            f'<tr class="{cls}"><td><code>{_e(row.kind)}</code></td>'
            f"<td>{_e(row.description)}</td>{counts}</tr>"
        )
    return "<h2>Faults injected (trials)</h2>" + _table(
        ("fault", "what it does", "exhaustive", "random", "failed"), rows
    )


MAX_FAILURES_LISTED = 50
"""Failed and unknown trials listed at the top; the trials table has them all."""


def _replay(command: str) -> str:
    """A replay command to read and copy (the button needs JS; the text is there without)."""
    return (
        f'<div class="replay"><code>{_e(command)}</code>'
        '<button class="copy" type="button" title="copy the command">copy</button></div>'
    )


def _failures(run_dir: Path, results: list[TrialResult], pages: set[Path]) -> str:
    """The failed trials, then those that could not be judged: each with the invariants
    it broke and the first line of their evidence, and its replay command."""
    bad = sorted(
        (r for r in results if r.status in _STATUS_ORDER),
        key=lambda r: (_STATUS_ORDER[r.status], r.spec.trial_id),
    )
    if not bad:
        return ""
    items = []
    for r in bad[:MAX_FAILURES_LISTED]:
        link = _link(run_dir, r) if r.directory in pages else None
        name = f"<code>{_e(r.spec.trial_id)}</code>"
        if link:
            name = f'<a href="{_e(link)}">{name}</a>'
        broke = "".join(
            f'<li><span class="broke">{_e(v.invariant)}</span> {_e(v.title)}'
            f"{' (could not judge)' if v.status == 'unknown' else ''}: "
            f"{_e(v.evidence[0] if v.evidence else '')}</li>"
            for v in r.verdicts
            if v.status == r.status
        )
        items.append(
            f'<li data-status="{_e(r.status)}">{_badge(r.status)} {name} '
            f'<span class="sum">{_e(r.spec.schedule.describe())}</span>'
            f"<ul>{broke}</ul>{_replay(r.spec.replay_command())}</li>"
        )
    failed = sum(r.status == "fail" for r in bad)
    unknown = len(bad) - failed
    more = ""
    if len(bad) > MAX_FAILURES_LISTED:
        more = f"<p>… and {len(bad) - MAX_FAILURES_LISTED} more in the trials table below.</p>"
    return (
        f'<h2 id="failures">Failures: {many(failed, "trial")} failed, '
        f"{unknown} could not be judged</h2>"
        f'<ol class="failures">{"".join(items)}</ol>{more}'
    )


_STATUS_ORDER = {"fail": 0, "unknown": 1}
"""Failed trials first, then those that could not be judged, then the rest."""


def _not_held(r: TrialResult) -> str:
    """The invariants a trial failed, and those it could not judge (marked so)."""
    parts = list(r.failed_invariants)
    parts += [f"{key} (could not judge)" for key in r.unknown_invariants]
    return ", ".join(parts)


def _trials(run_dir: Path, results: list[TrialResult], pages: set[Path]) -> str:
    ordered = sorted(results, key=lambda r: (_STATUS_ORDER.get(r.status, 2), r.spec.trial_id))
    rows = []
    for r in ordered:
        link = _link(run_dir, r) if r.directory in pages else None
        page = f'<a href="{_e(link)}">timeline</a>' if link else ""
        rows.append(
            f'<tr class="{_e(r.status)}" data-status="{_e(r.status)}">'
            f'<td><code title="{_e(r.spec.replay_command())}">{_e(r.spec.trial_id)}</code>'
            f"<details><summary>replay</summary>{_replay(r.spec.replay_command())}</details></td>"
            f"<td>{_e(r.spec.scenario_name)}</td>"
            f"<td>{_e(r.spec.kind)}</td><td><code>{_e(r.spec.schedule.describe())}</code></td>"
            f'<td class="n">{r.lives}</td><td class="n">{r.kills}</td><td>{_badge(r.status)}</td>'
            f"<td>{_e(_not_held(r))}</td><td>{page}</td></tr>"
        )
    linked = sum(r.directory in pages for r in results)
    kept = sum(r.kept for r in results)
    limit = ""
    if linked < len(results):
        limit = (
            f"<p>Timeline pages: every failed or unknown trial and at most "
            f"{MAX_PASSING_PAGES} passing ones ({linked} of {len(results)} trials). "
            f"{many(kept, 'trial')} kept their folder (journal, world.db, events); every trial's "
            f"verdicts, schedule and replay command are in <code>{TRIALS_FILE}</code>, "
            "and its replay under its name.</p>"
        )
    counts: Counter[str] = Counter(r.status for r in results)
    choices = "".join(
        f'<label><input type="radio" name="status" value="{value}"{checked}> '
        f"{words} ({counts[value] if value != 'all' else len(results)})</label>"
        for value, words, checked in (
            ("all", "all", " checked"),
            ("fail", "failed", ""),
            ("unknown", "could not judge", ""),
            ("pass", "passed", ""),
        )
    )
    controls = (
        f'<p class="filter">{choices}<input id="q" type="search" placeholder="filter trials">'
        '</p><p class="pager"><button id="prev" type="button">← previous</button> '
        '<span id="shown"></span> <button id="next" type="button">next →</button></p>'
    )
    return f"<h2>Trials</h2>{limit}{controls}" + _table(
        ("trial", "scenario", "kind", "schedule", "lives", "kills", "status", "not held", "page"),
        rows,
        table_id="trials",
    )


def _pages_to_write(results: list[TrialResult], checks: list[SelfCheckRow]) -> list[TrialResult]:
    """Every failed or unknown trial, the self-check catches, and some passing trials.

    Passing trials are taken round-robin over their kinds, so a large campaign
    still shows a few of each kind (exhaustive, random, ...), not only the first scenario.
    """
    chosen: dict[Path, TrialResult] = {}
    for r in results:
        if r.status != "pass":
            chosen.setdefault(r.directory, r)
    for check in checks:
        if check.caught is not None:
            chosen.setdefault(check.caught.directory, check.caught)
    by_kind: dict[str, list[TrialResult]] = {}
    for r in sorted(results, key=lambda r: r.spec.trial_id):
        if r.status == "pass" and r.kept and r.directory not in chosen:
            by_kind.setdefault(r.spec.kind, []).append(r)
    queues = [iter(v) for _, v in sorted(by_kind.items())]
    taken = 0
    while queues and taken < MAX_PASSING_PAGES:
        for queue in list(queues):
            passing = next(queue, None)
            if passing is None:
                queues.remove(queue)
            elif taken < MAX_PASSING_PAGES:
                chosen[passing.directory] = passing
                taken += 1
    return list(chosen.values())


def write_index_html(run_dir: Path, results: list[TrialResult], checks: list[SelfCheckRow]) -> None:
    """Write the trial pages worth writing, then ``index.html`` linking those that exist."""
    pages = {r.directory for r in _pages_to_write(results, checks) if write_trial_page(run_dir, r)}
    overview = _overview(run_dir, results, checks)
    body = "".join(
        (
            _header(run_dir, overview, results),
            _failures(run_dir, results, pages),
            _invariants(results),
            _coverage(results),
            _faults(results),
            _self_check(run_dir, checks, pages),
            _every_invariant_fails(checks),
            _trials(run_dir, results, pages),
        )
    )
    (run_dir / "index.html").write_text(_page("chaos run", body, _INDEX_JS), "utf-8")


# -- one trial --------------------------------------------------------------------------


def write_trial_page(run_dir: Path, result: TrialResult) -> bool:
    """Write ``timeline.html`` in the trial's folder; False if it could not be written."""
    try:
        page = _trial_page(run_dir, result)
    except Exception as exc:  # one unreadable trial must not cost the run its report
        page = _page(
            result.spec.trial_id,
            f'<h1>{_e(result.spec.trial_id)}</h1><p class="problem">'
            f"this page could not be built: {_e(type(exc).__name__)}: {_e(exc)}</p>",
        )
    try:
        (result.directory / TRIAL_PAGE).write_text(page, "utf-8")
    except OSError:
        return False
    return True


def _idle(verdict: Verdict) -> str:
    """Beside a pass that had nothing to judge, so it is not read as tested."""
    return " nothing to judge" if verdict.status == "pass" and not verdict.applied else ""


def broken_ops(verdicts: Iterable[Verdict], timeline: Timeline) -> dict[str, list[str]]:
    """Op -> the failed invariants whose evidence names it (by its id, or by its plan's id
    for a re-issued call: ``s003`` names ``s003~2``), for the ops of ``timeline``."""
    ops = {row.op for life in timeline.lives for row in life.rows if row.op}
    marks: dict[str, list[str]] = {}
    for verdict in verdicts:
        if verdict.status != "fail":
            continue
        words = {w.rstrip(".") for line in verdict.evidence for w in _WORD.findall(line)}
        for op in sorted(ops):
            if op in words or plan_id(op) in words:
                marks.setdefault(op, []).append(verdict.invariant)
    return marks


_WORD = re.compile(r"[\w.~-]+")


def _trial_page(run_dir: Path, result: TrialResult) -> str:
    spec = result.spec
    index = os.path.relpath(run_dir / "index.html", result.directory)
    facts = [
        ("scenario", f"<code>{_e(spec.scenario)}</code>"),
        ("seed", _e(spec.seed)),
        ("runtime", _e(spec.runtime)),
        ("kind", _e(spec.kind)),
        ("label", _e(spec.label)),
        ("schedule", f"<code>{_e(spec.schedule.describe())}</code>"),
        ("lives, kills", f"{many(result.lives, 'life', 'lives')}, {many(result.kills, 'kill')}"),
        ("failpoints reached", _e("; ".join(result.reached) or "none")),
        ("random-kill windows", _e(", ".join(result.windows) or "none")),
        ("duration", f"{result.duration_ms:.0f} ms"),
        ("folder", f"<code>{_e(result.directory)}</code>"),
    ]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    verdicts = [
        f'<tr class="{_e(v.status)}"><td>{_e(v.invariant)}</td><td>{_e(v.title)}</td>'
        f"<td>{_badge(v.status)}{_idle(v)}</td>"
        f"<td>{'<br>'.join(_e(line) for line in v.evidence)}</td></tr>"
        for v in result.verdicts
    ]
    read = read_timeline(result.directory, windows=result.windows)
    timeline = render_timeline(read, broken_ops(result.verdicts, read))
    body = (
        f'<p><a href="{_e(quote(index, safe="/"))}">← run index</a></p>'
        f"<h1><code>{_e(spec.trial_id)}</code> {_badge(result.status)}</h1>"
        f'<dl class="facts">{dl}</dl><h2>Replay</h2><pre>{_e(spec.replay_command())}</pre>'
        f"<h2>Verdicts</h2>{_table(('', 'invariant', 'status', 'evidence'), verdicts)}"
        f"<h2>Timeline</h2>{timeline}"
    )
    return _page(f"{spec.trial_id} ({result.status})", body)
