"""What a sweep writes: issue titles and bodies, comments and the summary table (pure text)."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.adapters.history import IssueCase, Notice
from bot.core.report import GITHUB_COMMENT_LIMIT
from bot.core.safe_markdown import cell, code_span, fenced, plain
from bot.core.suspects import commit_url, compare_url, table_text, tie_line
from bot.core.verdicts import FLAKY, failed_otherwise, same_failure

LABELS = ("torch-bisect-bot", "sweep-regression")
MARKER = "<!-- torch-bisect-bot:regression case={case} first_bad={first_bad} -->"


UNTESTABLE_MARKER = "<!-- torch-bisect-bot:untestable case={case} passed_in={passed_in} -->"
UNTESTABLE = "untestable"  # the `kind` of the detail of a case that can no longer be judged
# A new failure's bisection the sweep stopped (its deadline): its status, and its row's
# transition, as nothing is known of where it broke and nothing is filed yet.
UNFINISHED = "unfinished"
_TALLIED = {UNFINISHED: "unfinished (bisection stopped before its answer; not filed yet)"}


def regression_key(case_id: str, first_bad: str) -> str:
    """The dedup key, written into the issue body as a hidden marker."""
    return MARKER.format(case=case_id, first_bad=first_bad)


def untestable_key(case_id: str, passed_in: str) -> str:
    """The key of a case that passed on `passed_in` and can no longer be judged since: one
    issue for the nights until it passes or fails again."""
    return UNTESTABLE_MARKER.format(case=case_id, passed_in=passed_in)


@dataclass(frozen=True)
class Row:
    """One line of the summary: a case, what it did on this nightly and what follows."""

    case_id: str
    verdict: str
    previous: str
    transition: str
    note: str


def summary_table(nightly: str, rows: Sequence[Row]) -> str:
    lines = [f"### Sweep of nightly {nightly}", ""]
    lost = [row for row in rows if row.transition in ("new-untestable", "still-untestable")]
    if lost:
        new = sum(row.transition == "new-untestable" for row in lost)
        lines += [f"**{len(lost)} case(s) passed on an earlier nightly and can no longer be "
                  f"judged ({new} new tonight)**: each fails in a way its `match` does not "
                  "take, or its runs disagree (flaky). Filed for a person to look:", "",
                  *_listed([f"{_named(row.case_id)}: {cell(row.note, 200)}" for row in lost],
                           "more: see the table"), ""]
    lines += ["| case | verdict | previous | transition | note |",
              "| --- | --- | --- | --- | --- |"]
    for row in rows:
        note = cell(row.note, 400)
        name = _named(row.case_id).replace("|", "\\|")  # GitHub's escape, in code too
        lines.append(f"| {name} | {row.verdict} | {row.previous} | {row.transition} "
                     f"| {note} |")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.transition] = counts.get(row.transition, 0) + 1
    tally = ", ".join(f"{n} {_TALLIED.get(name, name)}"
                      for name, n in sorted(counts.items())) or "no cases"
    return "\n".join([*lines, "", f"{len(rows)} case(s): {tally}", ""])


def _named(case_id: str) -> str:
    """A case's id in text the bot writes: its file's path, which may hold a backtick (or
    `@team`, a link) and so goes in a code span no backtick inside it can end."""
    return code_span(case_id[:200])


def issue_title(case_id: str, first_bad: str) -> str:
    return f"[sweep] {case_id} regressed in nightly {first_bad}"


# Rows of the builds table and names of candidates an issue shows: GitHub takes 65,536
# characters a body, and a bisection over a year of builds probes hundreds (an audit's
# ambiguous 365-build window made a 72,720-character body, which GitHub refuses).
_SHOWN = 60


def _shown(items: Sequence[Any], most: int = _SHOWN) -> tuple[list[Any], int]:
    """The first and last of `items` when there are more than `most`, and how many not."""
    if len(items) <= most:
        return list(items), 0
    half = max(1, most // 2)
    return [*items[:half], *items[-half:]], len(items) - 2 * half


def _probe_table(probes: Sequence[dict[str, Any]]) -> list[str]:
    if not probes:
        return []
    lines = ["| build | verdict | reason |", "| --- | --- | --- |"]
    shown, left_out = _shown(probes)
    for index, probe in enumerate(shown):
        if left_out and index == len(shown) // 2:
            lines.append(f"| … {_counted(left_out, 'more build', 'more builds')} | | |")
        reason = cell(str(probe.get("reason", "")), 120)
        lines.append(f"| `{probe['version']}` | {probe['verdict']} | {reason} |")
    return ["", "Builds tested:", "", *lines]


def fails_differently(filed: str | None, now: str | None) -> bool:
    """Whether the nightly's failure is another than the one an issue was filed for."""
    return bool(filed and now) and not same_failure(filed, now)


def _commit_lines(detail: dict[str, Any]) -> list[str]:
    closed = ([f"- an earlier issue of these two nightlies, #{detail['closed_issue']}, is "
               "closed"] if detail.get("closed_issue") else [])
    commits = detail.get("commits") or {}
    good, bad = commits.get("last_good"), commits.get("first_bad")
    if not (good and bad and str(good).isalnum() and str(bad).isalnum()):
        return closed
    on_main = (detail.get("commit_range") or {}).get("good_main")
    between = "" if on_main else f"; between them: {compare_url(good, bad)}"  # main's below
    return [f"- commits: last good [`{good[:10]}`]({commit_url(good)}), first bad "
            f"[`{bad[:10]}`]({commit_url(bad)}){between}", *closed]


def _suspect_lines(detail: dict[str, Any]) -> list[str]:
    """The window on main and the commits the case's operators point at, as filed."""
    found = detail.get("commit_range")
    if not isinstance(found, dict):
        return []
    lines = []
    if found.get("good_main") and found.get("compare_url"):
        count = found.get("commit_count")
        lines.append(f"- on main: {found['compare_url']} "
                     f"({_counted(count, 'commit', 'commits')})")
    if found.get("note"):
        lines.append(f"- _{cell(str(found['note']), 300)}_")
    suspects = [s for s in found.get("suspects") or () if isinstance(s, dict)]
    if suspects:
        lines += ["", "| suspect | title | why |", "| --- | --- | --- |"]
        lines += [f"| [`{str(s.get('sha'))[:10]}`]({commit_url(str(s.get('sha')))}) "
                  f"| {table_text(str(s.get('title', '')))} "
                  f"| {table_text('; '.join(map(str, s.get('reasons') or ())))} |"
                  for s in suspects]
        tied = found.get("tied")
        if isinstance(tied, int) and tied > 0:
            lines += ["", tie_line(tied)]
    return lines


def _gap_line(detail: dict[str, Any]) -> list[str]:
    days = detail.get("unpublished_days")
    if not days:
        return []
    return [f"- no nightly was published for {days} day(s) between the last good and the "
            "first bad one: the window holds those days' commits too"]


def _unsure(detail: dict[str, Any]) -> bool:
    """An ambiguous bisection: untestable builds before its first bad nightly (the newest
    candidate) may be the first bad one."""
    candidates = list(detail.get("candidates") or ())
    return detail.get("status") == "ambiguous" and len(candidates) > 1 \
        and detail.get("first_bad") != candidates[0]


def _bisection_line(detail: dict[str, Any]) -> str:
    """How the search ended: a note in parentheses follows the status ("found (adjacent
    nightlies)"), a reason after a colon ("ambiguous: 1 untestable build(s) hide ...")."""
    status, note = detail.get("status", "found"), str(detail.get("note") or "")
    return f"- bisection: {status}{' ' if note.startswith('(') else ': '}{note}".rstrip(" :")


def issue_body(case_id: str, detail: dict[str, Any], latest: str,
               now: dict[str, Any] | None = None) -> str:
    """The issue of one regression; rewritten whole when a later sweep sees it again (`now`:
    that sweep's finding, which may fail otherwise than the one filed)."""
    first_bad, last_good = detail["first_bad"], detail.get("last_good")
    # Ambiguous: builds that could not be tested lie between the ends; the first bad one is
    # among the candidates, the newest of which is only the key of this issue.
    unsure = _unsure(detail)
    when = (f"started failing after nightly `{last_good}`, in one of the candidates below, "
            f"by **{first_bad}** at the latest" if unsure and last_good else
            f"started failing in nightly **{first_bad}**")
    lines = [
        regression_key(case_id, first_bad),
        f"The scheduled sweep found that {_named(case_id)} "
        f"({plain(str(detail.get('path', '')))}) {when}.",
        "",
        f"- last good nightly: `{last_good or 'unknown'}`",
        f"- first bad nightly: `{first_bad}`" + (" or an untested one before it (the "
                                                 "candidates)" if unsure else ""),
        _bisection_line(detail),
        "- failure: " + code_span(str(detail.get("signature") or detail.get("reason")
                                      or "unknown")),
        *_commit_lines(detail),
        *_gap_line(detail),
        f"- still failing as of nightly: `{latest}`",
        *_earlier_lines(detail),
        *_earlier_issue_line(detail),
    ]
    suspects = _suspect_lines(detail)
    signature = (now or {}).get("signature")
    if fails_differently(detail.get("signature"), signature):
        lines.append(f"- **fails differently in `{latest}`**: {code_span(str(signature))}. The "
                     "failure filed here may be fixed with another one behind it; that one was "
                     "not bisected")
    lines += _candidate_line(detail)
    lines += suspects
    lines += _probe_table(detail.get("probes") or [])
    tail = str(detail.get("output_tail") or "").strip()
    if tail:
        lines += ["", "Output of the first bad run (tail):", "", fenced(tail[-3000:])]
    lines += ["", "Rerun locally:", "", "```", _rerun(detail), "```", ""]
    return "\n".join(lines)


def _rerun(detail: dict[str, Any]) -> str:
    rerun = ["bisect-bot", "bisect", str(detail.get("path", "REPRO.py"))]
    if detail.get("last_good"):
        rerun += ["--good", str(detail["last_good"])]
    rerun += ["--bad", str(detail["first_bad"]), "--index",
              str(detail.get("index_url", "INDEX_URL")), *detail.get("flags", ())]
    return " ".join(map(shlex.quote, rerun))


def _case_state(case: IssueCase) -> str:
    if case.fixed_in:
        return f"passes again in `{case.fixed_in}`"
    if case.removed_in:
        return (f"no longer in the suite (the sweeps of nightly `{case.removed_in}` did not "
                f"have it); last seen failing in `{case.seen_in or case.detail['first_bad']}`")
    if case.detail.get("adopted") and not case.seen_in:
        return "not known: the history that filed it was lost (followed from its next result)"
    latest = case.seen_in or case.detail["first_bad"]
    if fails_differently(case.detail.get("signature"), case.seen_signature):
        return (f"**fails differently** in `{latest}`: "
                f"{code_span(str(case.seen_signature)[:120])}")
    return f"still failing in `{latest}`"


def untestable_title(case_id: str, nightly: str) -> str:
    return f"[sweep] {case_id} can no longer be judged in nightly {nightly}"[:256]


def untestable_body(case_id: str, detail: dict[str, Any], latest: str | None = None,
                    signature: str | None = None) -> str:
    """The issue of a case that passed on `passed_in` and, since `first_bad`, neither passes
    nor fails as its metadata defines a failure: nothing was bisected."""
    first, passed = detail["first_bad"], detail.get("passed_in")
    reason = str(detail.get("reason") or "")
    if reason.startswith(FLAKY):
        why = (f"its runs disagree ({code_span(reason)}): a race, a flaky check, or a "
               "regression that shows only some of the time. Give it more `repeat`, or make "
               "it deterministic")
    else:
        match = detail.get("match")
        why = (f"it fails, but not as its `match` {code_span(str(match)) if match else ''} "
               f"takes a failure: {code_span(failed_otherwise(reason) or reason)}. If "
               "that is the bug the case is about, widen its `match`; otherwise the case "
               "is broken by something else and no longer tests its bug")
    lines = [
        untestable_key(case_id, str(passed)),
        f"The scheduled sweep ran {_named(case_id)} ({plain(str(detail.get('path', '')))}): it "
        f"passed on "
        f"nightly `{passed}`, and since nightly **{first}** {why}.",
        "",
        "The sweep counts this as no verdict, so it bisects nothing and files nothing else "
        "for the case until it passes or fails as defined again.",
        "",
        f"- passed on nightly: `{passed}`",
        f"- first seen: `{first}`",
        f"- still seen as of nightly: `{latest or first}`",
    ]
    if signature and fails_differently(detail.get("signature"), signature):
        lines.append(f"- **now otherwise**: {code_span(signature)}")
    if detail.get("issue"):
        lines.append(f"- the case's issue: {cell(str(detail['issue']), 200)}")
    lines += _earlier_lines(detail) + _earlier_issue_line(detail)
    tail = str(detail.get("output_tail") or "").strip()
    if tail:
        lines += ["", f"Output on `{first}` (tail):", "", fenced(tail[-3000:])]
    rerun = ["bisect-bot", "bisect", str(detail.get("path", "REPRO.py"))]
    if passed:
        rerun += ["--good", str(passed)]
    rerun += ["--bad", str(first), "--index", str(detail.get("index_url", "INDEX_URL")),
              *detail.get("flags", ())]
    lines += ["", "Rerun locally:", "", "```", " ".join(map(shlex.quote, rerun)), "```", ""]
    return "\n".join(lines)


def _earlier_lines(detail: dict[str, Any]) -> list[str]:
    """The case's earlier episodes this issue followed (it was seen fixed, then came back)."""
    earlier = [e for e in detail.get("earlier") or () if isinstance(e, dict)]
    if not earlier:
        return []
    shown, left_out = _shown(earlier, 10)
    said = [f"`{e.get('first_bad')}` to `{e.get('fixed_in')}`" for e in shown]
    more = f" (and {left_out} more)" if left_out else ""
    return [f"- **back again**: this issue followed the case before, failing from "
            f"{', '.join(said)}{more} (where it passed again)"]


def _earlier_issue_line(detail: dict[str, Any]) -> list[str]:
    """The case's earlier issue of the same kind that saw it fixed and that this one does not
    follow (a person closed it, or it is an issue of several cases): named, never written."""
    number = detail.get("earlier_issue")
    return [f"- an earlier issue of this case, #{number}, was seen fixed"] if number else []


def issue_text(cases: Sequence[IssueCase]) -> tuple[str, str]:
    """The title and body of a sweep issue: one case's regression, or the cases that broke
    between the same two nightlies (one change that breaks 30 cases is one issue, not 30)."""
    if len(cases) == 1 and cases[0].detail.get("kind") == UNTESTABLE:
        case = cases[0]
        return (untestable_title(case.case_id, case.detail["first_bad"]),
                untestable_body(case.case_id, case.detail, case.seen_in,
                                case.seen_signature))
    if len(cases) == 1:
        case = cases[0]
        first_bad = case.detail["first_bad"]
        return (issue_title(case.case_id, first_bad),
                issue_body(case.case_id, case.detail, case.seen_in or first_bad,
                           {"signature": case.seen_signature}))
    return _group_title(cases), _group_body(cases)


def _group_title(cases: Sequence[IssueCase]) -> str:
    first_bad = cases[0].detail["first_bad"]
    return (f"[sweep] {len(cases)} cases regressed in nightly {first_bad} "
            f"({cases[0].case_id} and {len(cases) - 1} more)")[:256]  # GitHub's longest title


def _group_body(cases: Sequence[IssueCase]) -> str:
    # The first filed (its window is every case's), but not one followed from a marker only
    lead = next((c.detail for c in cases if not c.detail.get("adopted")), cases[0].detail)
    first_bad, last_good = lead["first_bad"], lead.get("last_good")
    variants = sorted({str(c.detail["first_bad"]).partition("+")[2] for c in cases} - {""})
    searched = max(cases, key=lambda case: len(case.detail.get("probes") or []))
    failing = [case for case in cases if not case.fixed_in and not case.removed_in]
    removed = sum(1 for case in cases if case.removed_in and not case.fixed_in)
    head = [
        f"The scheduled sweep found that {len(cases)} cases started failing in nightly "
        f"**{first_bad}**: the same two nightlies bound each one's regression, so one change "
        "in between probably broke them all (or several changes of that day).",
        "",
        f"- last good nightly: `{last_good or 'unknown'}`",
        f"- first bad nightly: `{first_bad}`"
        + (" or an untested one before it (the candidates)" if _unsure(searched.detail) else "")
        + (f" (the cases ran on the {', '.join(f'`+{v}`' for v in variants)} builds of that "
           "date)" if len(variants) > 1 else ""),
        *_commit_lines(lead),
        *_gap_line(lead),
        _bisection_line(searched.detail),
        *_candidate_line(searched.detail),
        f"- still failing: {len(failing)} of the {len(cases)} cases"
        + (f" ({removed} no longer in the suite)" if removed else ""),
        *_suspect_lines(next((c.detail for c in cases if "commit_range" in c.detail), lead)),
    ]
    builds = _probe_table(searched.detail.get("probes") or [])
    if builds:
        builds[1] = f"Builds tested by {code_span(searched.case_id[:200])}'s bisection:"
    tail = str(lead.get("output_tail") or "").strip()
    if tail:
        builds += ["", f"Output of {code_span(cases[0].case_id[:200])}'s first bad run (tail):",
                   "", fenced(tail[-3000:])]
    every = [regression_key(case.case_id, case.detail["first_bad"]) for case in cases]
    # Hundreds of cases overfill what GitHub takes: the reruns go first, then the builds and
    # the output, then rows; the markers of every case stay (a lost history finds by them),
    # at the end, where a cut takes only markers.
    shown_rows = _SHOWN
    while True:
        shown, left_out = _shown(cases, shown_rows)
        table = _case_table(shown, left_out)
        reruns = ["", "Rerun one locally:", "", "```",
                  *(_rerun(case.detail) for case in shown if case.detail.get("path")), "```"]
        for parts in ((head, table, builds, reruns, [""], every),
                      (head, table, builds, [""], every), (head, table, [""], every)):
            body = "\n".join([line for part in parts for line in part] + [""])
            if len(body) <= GITHUB_COMMENT_LIMIT:
                return body
        if shown_rows <= 2:
            break
        shown_rows = max(2, shown_rows // 2)
    # Too many markers to fit at all: every row shown again, and the markers (last) as far
    # as they fit, cut at a line.
    shown, left_out = _shown(cases)
    body = "\n".join([*head, *_case_table(shown, left_out), "", *every, ""])
    return body[: body.rfind("\n", 0, GITHUB_COMMENT_LIMIT - 1) + 1]


def _candidate_line(detail: dict[str, Any]) -> list[str]:
    candidates, left_out = _shown(detail.get("candidates") or [])
    if not candidates:
        return []
    names = [f"`{c}`" for c in candidates]
    middle = len(names) // 2
    more = [f"… {left_out} more"] if left_out else []
    return ["- candidates: " + ", ".join([*names[:middle], *more, *names[middle:]])]


def _case_table(shown: Sequence[IssueCase], left_out: int) -> list[str]:
    rows = ["", "| case | failure | now |", "| --- | --- | --- |"]
    for index, case in enumerate(shown):
        if left_out and index == len(shown) // 2:
            rows.append(f"| … {_counted(left_out, 'more case', 'more cases')} | | |")
        failure = cell(str(case.detail.get("signature") or case.detail.get("reason")
                           or "unknown"), 160)
        rows.append(f"| {code_span(case.case_id[:200]).replace('|', '&#124;')} "
                    f"({cell(str(case.detail.get('path', '')), 120)}) "
                    f"| {failure} | {_case_state(case).replace('|', '&#124;')} |")
    return rows


def notices_marker(notices: Sequence[Notice]) -> str:
    """What marks a comment as saying these notices, so that a filing run again (a collect
    job re-run from the history it started with, over the same exports) says them once: a
    digest, whatever their number (a comment of 500 cases' markers would not fit)."""
    said = sorted(f"{n.kind} {n.case_id} {n.nightly}" for n in notices)
    digest = hashlib.sha256("\n".join(said).encode()).hexdigest()[:16]
    return f"<!-- torch-bisect-bot:notices={digest} -->"


def fixed_comment(case_id: str, nightly: str, failed_in: str | None) -> str:
    since = f" (it failed on `{failed_in}`)" if failed_in else ""
    return (f"<!-- torch-bisect-bot:fixed case={case_id} -->\n"
            f"The scheduled sweep says {_named(case_id)} appears fixed in nightly {nightly}: "
            f"it passes there{since}.\n")


def notices_comment(notices: Sequence[Notice]) -> str:
    """One comment for what a filing has to tell an issue: cases that pass again, cases that
    joined it (a revert that fixes 30 cases is one comment, not 30 notifications)."""
    fixed = [n for n in notices if n.kind == "fixed"]
    joined = [n for n in notices if n.kind == "joined"]
    again = [n for n in notices if n.kind == "again"]
    edited = [n for n in notices if n.kind == "edited"]
    removed = [n for n in notices if n.kind == "removed"]
    if len(fixed) == 1 and not joined and not again and not edited and not removed:
        return (fixed_comment(fixed[0].case_id, fixed[0].nightly, fixed[0].previous)
                + notices_marker(notices) + "\n")
    lines: list[str] = []
    if removed:
        lines.append("The scheduled sweep no longer runs "
                     + ("these cases: they are" if len(removed) > 1 else
                        f"{_named(removed[0].case_id)}: it is")
                     + " no longer in the suite, so what this issue says of "
                     + ("them is as of their" if len(removed) > 1 else "it is as of its")
                     + " last sweep. Close it if that is right, or add the case"
                     + ("s" if len(removed) > 1 else "") + " back:")
        lines += _listed([f"{_named(n.case_id)} removed (the sweeps of nightly {n.nightly} "
                          "did not have it)" for n in removed], "more were removed",
                         "more was removed")
        lines += [""] if fixed or joined or again or edited else []
    if again:  # what came back first: the body above says how it fails now
        lines.append("The scheduled sweep says this issue's "
                     + ("cases are" if len(again) > 1 else "case is") + " back; the body "
                     "above says how "
                     + ("they fail" if len(again) > 1 else "it fails") + " now:")
        lines += _listed([f"{_named(n.case_id)} is back in nightly {n.nightly}" +
                          (f" (it had passed again in `{n.previous}`)" if n.previous else "")
                          for n in again], "more are back", "more is back")
        lines += [""] if fixed or joined else []
    if edited:  # not the nightly's fix: the case is not what failed
        lines.append("The scheduled sweep says these cases were edited since they failed, and "
                     "pass with their edited text: whether torch fixed what they showed is not "
                     "known (the earlier text, run on the same nightly, would tell):"
                     if len(edited) > 1 else
                     f"The scheduled sweep says {_named(edited[0].case_id)} was edited since it "
                     "failed, and passes with its edited text: whether torch fixed what it "
                     "showed is not known (the earlier text, run on the same nightly, would "
                     "tell):")
        lines += _listed([f"{_named(n.case_id)} passes with its edited text in nightly "
                          f"{n.nightly}"
                          + (f" (its earlier text failed on `{n.previous}`)" if n.previous
                             else "") for n in edited], "more: see the table above")
        lines += [""] if fixed or joined else []
    if fixed:
        lines.append(f"The scheduled sweep says "
                     f"{_counted(len(fixed), 'case appears', 'cases appear')} fixed:")
        lines += _listed([f"{_named(n.case_id)} appears fixed in nightly {n.nightly}: it "
                          "passes there" + (f" (it failed on `{n.previous}`)" if n.previous else "")
                          for n in fixed], "cases pass again: see the table above",
                         "case passes again: see the table above")
    if joined:
        lines += [""] if fixed else []
        lines.append(f"These {len(joined)} cases broke between the same two nightlies too, and "
                     "were added to the table above:" if len(joined) > 1 else
                     "This case broke between the same two nightlies too, and was added to the "
                     "table above:")
        lines += _listed([f"{_named(n.case_id)} (failing in nightly {n.nightly})"
                          for n in joined], "more joined: see the table above")
    return "\n".join([*lines, notices_marker(notices)]) + "\n"


def _listed(items: Sequence[str], more: str, one_more: str | None = None) -> list[str]:
    """Bullets of the first and last of `items` (a revert that fixes 500 cases made a
    comment of 89,051 characters, which GitHub refuses), each cut to a line's worth; `more`
    after the count of those left out (`one_more` after a count of 1)."""
    shown, left_out = _shown(items)
    bullets = [f"- {item[:300]}" for item in shown]
    if left_out:
        bullets.insert(len(bullets) // 2,
                       f"- … {_counted(left_out, one_more or more, more)}")
    return bullets


def _counted(count: object, one: str, many: str) -> str:
    """`count` and the words that follow it: "1 commit", "2 commits"."""
    return f"{count} {one if count == 1 else many}"
