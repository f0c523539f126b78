"""A finished (or running) bisection rendered as Markdown, terminal text and JSON."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from bot.core.bisection import GOOD_END_FAILS, Status
from bot.core.config import PYPI_INDEX
from bot.core.results import BisectResult, ProbeRecord
from bot.core.safe_markdown import cell, code_span, fenced, plain, visible
from bot.core.suspects import compare_url
from bot.core.verdicts import (
    INCOMPLETE,
    NO_NETWORK,
    NOT_INSTALLED,
    USAGE_ERROR,
    Verdict,
    failed_otherwise,
)

MARKER = "<!-- torch-bisect-bot:report -->"  # the bot edits the comment that carries it
_RUN_MARKER = re.compile(r"<!-- torch-bisect-bot:run=([\w.-]*) -->")
GITHUB_COMMENT_LIMIT = 65_536  # characters; GitHub rejects longer comment bodies


def headline(result: BisectResult, stopped: bool = False) -> str:
    """`stopped`: no more probes will come (a report of a run that ended without an answer),
    where a state between rounds of runners is still in progress."""
    outcome = result.outcome
    if outcome is None:
        return "Bisection stopped before its answer" if stopped else "Bisection in progress"
    before, after = result.version_at(outcome.before), result.version_at(outcome.after)
    fix = result.bisection.find_fix
    words = {
        Status.FOUND: (
            f"Fixed in `{after}` (last failing: `{before}`)" if fix
            else f"Regression found: first bad {_kind(result, outcome.after)} `{after}` "
            f"(last good: `{before}`)"
        ),
        Status.AMBIGUOUS: (
            f"Ambiguous: the boundary lies between `{before}` and `{after}`; "
            f"{'builds that fail otherwise' if _otherwise(result) else 'untestable builds'} "
            f"hide it ({len(outcome.candidates)} candidates)"
        ),
        Status.NOT_REPRODUCED: (
            f"Still failing on the newest testable build `{before}`{_untested_after(result)}"
            if fix else _not_reproduced(result, before)
        ),
        Status.NOT_A_REGRESSION: (
            _given_end_fails(result, after) if outcome.note == GOOD_END_FAILS
            else f"Passes on every build tested, back to `{after}`" if fix
            else f"Not a regression in range: fails on every build tested, back to `{after}`"
        ),
        Status.CANNOT_TEST: (
            f"Cannot test further back: every build tested from `{after}` on fails, and "
            f"{outcome.note}" if outcome.after is not None else f"Cannot test: {outcome.note}"
        ),
    }
    return words[outcome.status]


def _not_reproduced(result: BisectResult, before: str | None) -> str:
    """The newest build of the window passes. Where the window ends before the newest
    nightly (a bad end given), those after it were never tested: no "maybe already fixed";
    and a bad end the user gave that passes is their window's answer, not the issue's."""
    newer = int(result.options.get("newer_builds") or 0)
    untested = _untested_after(result)
    if newer <= 0:
        return (f"Not reproduced: the newest testable build `{before}` passes"
                + (untested or " (maybe already fixed)"))
    one, many = ("nightly", "nightlies") if result.builds[-1].date else ("build", "builds")
    beyond = f"{newer} newer {one} was not tested" if newer == 1 else \
        f"{newer} newer {many} were not tested"
    if not result.options.get("bad_given"):  # the nightly the issue reports failing on
        return f"Not reproduced: the newest testable build `{before}` passes{untested}; {beyond}"
    if untested:
        return (f"The bad end you gave, `{result.builds[-1].version}`, could not be tested, "
                f"and the newest testable build `{before}` passes; {beyond}")
    return f"The bad end you gave, `{before}`, passes; {beyond}"


def _given_end_fails(result: BisectResult, after: str | None) -> str:
    """The older end given shows the newer builds' behaviour: a mistaken end, not an answer
    ("not a regression in range" read as one)."""
    if result.bisection.find_fix:
        return f"The bad end you gave, `{after}`, passes, as the newer builds tested do"
    who = "the issue gives" if result.options.get("good_said") else "you gave"
    return f"The good end {who}, `{after}`, fails, as the newer builds tested do"


def _untested_after(result: BisectResult) -> str:
    """Newer builds than the newest testable one: they, not a fix, may hide the failure (a
    bad end given that could not be tested was "maybe already fixed")."""
    outcome = result.outcome
    newer = len(result.builds) - 1 - outcome.before if outcome and outcome.before is not None \
        else 0
    if newer <= 0:
        return ""
    some = "the newer one" if newer == 1 else f"the {newer} newer ones"
    return f"; {some}, up to `{result.builds[-1].version}`, could not be tested"


def further_back(result: BisectResult) -> str | None:
    """How to look further back, when a search without a good end failed back to the oldest
    nightly it found on the server."""
    if not result.failed_back_to_the_oldest:
        return None
    where = ("the oldest nightly it found, after looking up to a year before the oldest one the "
             "index lists" if result.options.get("looked_back") else
             "the oldest nightly the index lists")
    return (f"The search stopped at {where}: `{result.builds[0].version}`. To look further "
            f"back, give an older good end (a date, or a release such as `2.12.0`): the bot "
            f"finds older nightlies on the server by their names.")


# Python's words for a write the sandbox refuses: its view of the host is read-only outside
# the working folder, /tmp and the home folder (docs/security.md, "a read-only view").
_READ_ONLY = re.compile(r"\[Errno 30\] Read-only file system: '(?P<path>[^']*)'")


def writes_read_only(result: BisectResult) -> str | None:
    """Why every build failed when each failure is a write the sandbox refuses: it says
    nothing of torch, and read as "the good end fails too" or a failure back to the oldest
    nightly, with no word of the cause. Not where a build passed: a newer torch that writes
    where an older one did not (into its own read-only install) is a change of torch."""
    probes = [p for p in result.probes if not p.variant_env]
    failures = [p.reason for p in probes if p.verdict is Verdict.BAD]
    found = [_READ_ONLY.search(reason) for reason in failures]
    if not failures or not all(found) or any(p.verdict is Verdict.GOOD for p in probes):
        return None
    path = next(match["path"] for match in found if match)
    return (f"Every build fails the same way: the reproducer writes to {code_span(path[:120])}, "
            "and probes may write only in their working folder, `/tmp` and the home folder "
            "(the rest is read-only in the sandbox), so this says nothing of torch. Write to "
            "a relative path or `tempfile.gettempdir()` instead, and run it again.")


def good_end_fails(result: BisectResult) -> str | None:
    """What to do when the good end given fails as the newer builds do."""
    outcome = result.outcome
    if outcome is None or outcome.note != GOOD_END_FAILS or outcome.after is None:
        return None
    if result.bisection.find_fix:
        return (f"The bad end, `{result.version_at(outcome.after)}`, passes as the newer builds "
                "do, so it was not a failing build. Give an older bad end (`bad=` in a "
                "command, `--bad` locally), or none: the bot then steps back from the newest "
                "build until one fails.")
    said = result.options.get("good_said")
    where = (f" (from the issue's words \"{plain(str(said)[:120])}\")" if said else "")
    return (f"The good end, `{result.version_at(outcome.after)}`{where}, fails as the newer "
            "builds do, so it was not a good build. Give an older good end (`good=` in a "
            "command, `--good` locally), or none: the bot then steps back from the bad end "
            "until a build passes.")


def timed_out(result: BisectResult) -> str | None:
    """What to do when the builds that decided nothing timed out: the hang may be the bug."""
    outcome = result.outcome
    if (outcome is None or outcome.status is not Status.CANNOT_TEST
            or result.options.get("on_timeout") == "bad"):
        return None
    skipped = [p for p in result.probes if p.verdict is Verdict.SKIP and not p.variant_env]
    if not skipped or not all(p.reason.startswith("timed out") for p in skipped):
        return None
    return (f"Every build that could not be tested timed out ({skipped[0].reason}). If the "
            "hang is the bug, `hang=bad` in a command (`--on-timeout bad` locally) counts a "
            "run that times out as bad, with a `timeout=` well above a good build's run; if "
            "the reproducer is only slow, give it a longer `timeout=` (`--timeout` locally).")


def never_checks(result: BisectResult) -> str | None:
    """Why the newest build may pass with the issue's problem still there: the reproducer
    never checks a result (the jobs record that as the option `checks`)."""
    outcome = result.outcome
    if (outcome is None or outcome.status is not Status.NOT_REPRODUCED
            or result.bisection.find_fix or result.options.get("checks") is not False):
        return None
    return ("This reproducer never checks a result: it has no `assert`, `raise` or exit, so it "
            "passes whatever numbers it prints. If the problem is a wrong result, add a check "
            "such as `torch.testing.assert_close(compiled, eager)` and bisect again, or judge "
            "a number it prints with `metric=` and `threshold=` (`--metric`, `--threshold`).")


def unpublished(result: BisectResult) -> str | None:
    """Days without a nightly between the last good and the first bad one: their commits are
    in the window too (the sweeps' issues said so; a bisection's answer did not)."""
    outcome = result.outcome
    if (outcome is None or outcome.status is not Status.FOUND or outcome.before is None
            or outcome.after is None):
        return None
    good, bad = result.builds[outcome.before].date, result.builds[outcome.after].date
    days = (bad - good).days - 1 if good and bad else 0
    if days <= 0:
        return None
    return (f"No nightly was published for {days} day{'s' if days > 1 else ''} between the "
            "last good and the first bad one: the commits of those days are in the window too.")


def other_platform(result: BisectResult) -> str | None:
    """Why the newest build may pass: the issue reports another platform than the Linux
    builds bisected (the jobs record collect_env's as the option `reported_platform`)."""
    outcome, platform = result.outcome, result.options.get("reported_platform")
    if outcome is None or outcome.status is not Status.NOT_REPRODUCED or not platform:
        return None
    return (f"The issue reports {platform} (its collect_env `OS:` line), and the builds "
            f"tested are Linux ones: a bug of {platform} alone does not show here.")


def _skipped_for(result: BisectResult, why: str) -> list[str]:
    """What follows `why: ` in the reasons of the builds skipped for that reason, in order."""
    prefix = why + ": "
    return [p.reason[len(prefix):] for p in result.probes
            if p.verdict is Verdict.SKIP and p.reason.startswith(prefix)]


def not_installed(result: BisectResult) -> str | None:
    """Which modules the reproducer wanted that no environment had, and how to name them."""
    modules = sorted(set(_skipped_for(result, NOT_INSTALLED)))
    if not modules:
        return None
    names = ", ".join(code_span(module) for module in modules)
    return (f"The reproducer imports {names}, which the environments did not have, so those "
            "builds could not be tested. Name the packages to install, with versions where "
            "they matter: `with=PACKAGE,...` in a `/bisect` command, `--with PACKAGE` "
            "locally (they replace the packages guessed from the script's imports).")


def offline(result: BisectResult) -> str | None:
    """Why builds were skipped when the reproducer reached for the network."""
    if not _skipped_for(result, NO_NETWORK):
        return None
    return ("The reproducer reaches for the network (to download weights, a dataset or a "
            "hub model), and probes run without it, so those builds could not be tested. "
            "Make it self-contained: random weights of the same shapes (with transformers, "
            "`AutoModel.from_config(AutoConfig.for_model(...))` or a config written out), "
            "random inputs of the same shapes and dtypes.")


def incomplete(result: BisectResult) -> str | None:
    """Why builds were skipped when the script fails on its own, at its top level."""
    failures = _skipped_for(result, INCOMPLETE)
    if not failures:
        return None
    missing = ("It reads a file the issue does not include: make the inputs in the script "
               "(random tensors of the same shapes and dtypes, with a fixed seed) or build "
               "the model there. " if failures[0].startswith("FileNotFoundError") else "")
    return ("The script fails on its own before it tests anything "
            f"({code_span(failures[0])}), so no build could be tested. {missing}Paste a script "
            "that runs as it is (`python repro.py`), with the model and the inputs defined in "
            "it.")


def needs_arguments(result: BisectResult) -> str | None:
    """Why builds were skipped when the script stopped at its own usage error (argparse's
    exit 2): it needs command-line arguments it was not given, or refused those it was."""
    refused = _skipped_for(result, USAGE_ERROR)
    if not refused:
        return None
    given = result.options.get("script_args")
    ran = f"with {code_span(shlex.join(given))}" if given else "without arguments"
    return (f"The reproducer stopped at its own usage error ({code_span(refused[0][:200])}), "
            f"run {ran}, so those builds could not be tested. It needs command-line "
            "arguments: give them with `args=\"...\"` in a `/bisect` command "
            "(`--args='...'` locally), or show the `python repro.py ...` command in the "
            "issue.")


# uv's words for a package that no index given has (`uv_error` keeps them first).
_NOT_ON_INDEX = re.compile(r"not found in the package registr|there is no version of"
                           r"|which the reproducer needs beside torch, did not install")


def not_installable(result: BisectResult) -> str | None:
    """Why builds could not be installed, in full (a table row shows only its start), and
    what to change when a package is missing from the indexes."""
    failures = _skipped_for(result, "install failed")
    if not failures:
        return None
    said = f"{len(failures)} build(s) could not be installed: {code_span(failures[0][:400])}."
    if not _NOT_ON_INDEX.search(failures[0]):
        return said
    return (said + " Give an index that has the package (`--packages-index URL` locally, "
            "`packages_index` in the bot's config), name what to install instead "
            "(`with=PACKAGE,...` in a `/bisect` command, `--with` locally), or leave out "
            "setuptools and numpy (`--no-default-packages`).")


def flaky(result: BisectResult) -> str | None:
    """Builds whose repeated runs disagreed: the answer cannot lean on them."""
    disagreed = _skipped_for(result, "flaky")
    if not disagreed:
        return None
    return (f"{len(disagreed)} build(s) gave different verdicts on repeated runs "
            f"({disagreed[0]}), so they count as untestable. Make the reproducer deterministic "
            "(fixed seeds and inputs, `torch.use_deterministic_algorithms(True)`), or judge it "
            "on a number it prints with a tolerance (`metric=` and `threshold=` in a command, "
            "`--metric` and `--threshold` locally).")


def _otherwise(result: BisectResult) -> list[ProbeRecord]:
    """The window's builds that were tested and failed, but otherwise than the newest build
    (the failure the search follows): SKIP, and not "untestable" in a user's eyes."""
    outcome = result.outcome
    if outcome is None or outcome.status is not Status.AMBIGUOUS:
        return []
    candidates = set(outcome.candidates)
    return [p for p in result.probes if p.index in candidates and not p.variant_env
            and p.verdict is Verdict.SKIP and failed_otherwise(p.reason) is not None]


def _note(result: BisectResult) -> str:
    """The outcome's note, with builds that were tested and fail otherwise told apart from
    those that could not be tested (the core counts both as SKIP)."""
    assert result.outcome is not None
    other = _otherwise(result)
    if not other:
        return result.outcome.note
    hidden = len(result.outcome.candidates) - 1  # the first bad build is a candidate too
    untested = hidden - len(other)
    return (f"{len(other)} build(s) that fail otherwise"
            + (f" and {untested} untestable" if untested > 0 else "")
            + " hide the exact boundary")


def fails_otherwise(result: BisectResult) -> str | None:
    """Builds in the window that fail in another way: the search followed the newest build's
    failure; the other one may be the failure the reporter meant."""
    other = _otherwise(result)
    if not other:
        return None
    failure = failed_otherwise(other[0].reason) or ""
    kind = failure.split(":")[0].strip() or failure
    pattern = shlex.quote(re.escape(kind))
    return (f"{len(other)} build(s) in the window were tested and fail otherwise ("
            f"{code_span(failure[:160])}) than the newest build ("
            f"{code_span((result.signature or '?')[:160])}), whose failure the search follows. "
            f"If theirs is the failure you mean, bisect it: `match={pattern}` in a command "
            f"(`--match {pattern}` locally).")


def _hints(result: BisectResult) -> list[str]:
    hints = (writes_read_only(result), further_back(result), good_end_fails(result),
             timed_out(result), never_checks(result),
             other_platform(result), unpublished(result),
             not_installed(result), offline(result), incomplete(result), needs_arguments(result),
             not_installable(result),
             flaky(result), fails_otherwise(result))
    found = [hint for hint in hints if hint]
    return found or [hint for hint in (untestable_why(result),) if hint]


def untestable_why(result: BisectResult) -> str | None:
    """Why nothing could be tested, in a line, where no hint above says it (exit 125 on every
    build, `match=` matching none, a different failure): the table alone says it per row."""
    outcome = result.outcome
    if outcome is None or outcome.status is not Status.CANNOT_TEST:
        return None
    reasons = list(dict.fromkeys(p.reason for p in sorted(result.probes, key=lambda p: -p.index)
                                 if p.verdict is Verdict.SKIP and not p.variant_env))
    if not reasons:
        return None
    shown = "; ".join(code_span(reason[:160]) for reason in reasons[:3])
    more = f" and {len(reasons) - 3} more" if len(reasons) > 3 else ""
    return f"Why they could not be tested: {shown}{more}."


def _kind(result: BisectResult, index: int | None) -> str:
    """Nightlies carry a build date; releases and existing interpreters do not."""
    dated = index is not None and result.builds[index].date is not None
    return "nightly" if dated else "build"


def probe_table(result: BisectResult, max_rows: int | None = None) -> str:
    """Every probe, oldest first; with `max_rows`, the ones nearest the answer (its first bad
    build, else the newest), and a row saying how many more there were between."""
    probes = [p for p in sorted(result.probes, key=lambda p: p.index) if not p.variant_env]
    with_metric = any(p.metric is not None for p in probes)
    head = "| build | date | commit | verdict | reason | time |"
    head += " metric |" if with_metric else ""
    rows = [head, "|---" * head.count(" | ") + "|---|"]
    shown = _nearest(result, probes, max_rows)
    for number, probe in enumerate(probes):
        if probe.index not in shown:
            if number == 0 or probes[number - 1].index in shown:
                hidden = next((k for k, later in enumerate(probes[number:])
                               if later.index in shown), len(probes) - number)
                rows.append(f"| … {hidden} more builds | | | | | |" + (" |" if with_metric
                                                                          else ""))
            continue
        build = result.builds[probe.index]
        commit = str(probe.info.get("git_version") or "")[:10]
        date = build.date.isoformat() if build.date else ""
        metric = "" if probe.metric is None else f"{probe.metric:.6g}"
        rows.append(
            f"| `{build.version}` | {date} | {commit} | {probe.verdict.value} "
            f"| {cell(probe.reason)} | {probe.seconds:.1f} s |"
            + (f" {metric} |" if with_metric else "")
        )
    return "\n".join(rows)


def _nearest(result: BisectResult, probes: list[ProbeRecord],
             max_rows: int | None) -> set[int]:
    """The build indices of the `max_rows` probes nearest the answer (all of them without a
    cap)."""
    if max_rows is None or len(probes) <= max_rows:
        return {probe.index for probe in probes}
    outcome = result.outcome
    centre = outcome.after if outcome and outcome.after is not None else len(result.builds) - 1
    near = sorted(probes, key=lambda probe: (abs(probe.index - centre), probe.index))
    return {probe.index for probe in near[:max_rows]}


def _tail(probe: ProbeRecord | None, limit: int) -> str:
    if probe is None or probe.result is None:
        return ""
    text = probe.result.output or probe.result.error or ""
    return text[-limit:]


def _tails(result: BisectResult, limit: int) -> list[str]:
    outcome = result.outcome
    if outcome is None:
        return []
    parts = []
    fix = result.bisection.find_fix
    if outcome.located:
        labels = ("last failing", "first passing") if fix else ("last good", "first bad")
    else:  # no boundary: the builds nearest where it would be
        labels = ("newest failing", "oldest passing") if fix else ("newest passing",
                                                                   "oldest failing")
    for label, index in zip(labels, (outcome.before, outcome.after), strict=True):
        probe = result.probe_for(index)
        text = _tail(probe, limit)
        if probe is not None and text:
            summary = f"Output of the {label} build <code>{probe.version}</code>"
            parts.append(f"<details><summary>{summary}</summary>\n\n{fenced(text)}\n\n</details>")
    return parts


def bisect_flags(options: Mapping[str, Any]) -> list[str]:
    """The `bisect-bot bisect` flags of the options that change a verdict (or what is
    installed), as a bisection's result records them; the defaults left out."""
    parts: list[str] = []
    flags = (("--python", "python", None), ("--repeat", "repeat", 1),
             ("--timeout", "timeout", 600), ("--match", "match", None),
             ("--metric", "metric", None), ("--threshold", "threshold", None))
    for flag, key, default in flags:
        value = options.get(key)
        if value is not None and value != default:
            parts += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if options.get("on_timeout") == "bad":
        parts += ["--on-timeout", "bad"]
    if options.get("missing_api") == "bad":
        parts += ["--missing-api", "bad"]
    for package in options.get("with") or ():
        parts += ["--with", str(package)]
    if options.get("processes"):
        parts += ["--nproc-per-node", str(options["processes"])]
    for name, value in (options.get("env") or {}).items():
        parts += ["--env", f"{name}={value}"]
    if options.get("script_args"):  # with `=`: a value that starts with `-` is no flag's
        parts.append(f"--args={shlex.join(options['script_args'])}")
    if options.get("packages_index") not in (None, PYPI_INDEX):
        parts += ["--packages-index", str(options["packages_index"])]
    if options.get("no_default_packages"):
        parts.append("--no-default-packages")
    return parts


def rerun_command(result: BisectResult) -> str:
    """The command that bisects the same way on one's own machine: the issue itself when the
    bisection came from one (its reproducer is read from it; a comment's, by the comment's
    URL), and every option that changes a
    verdict (a metric without its threshold, or one run instead of three, judges otherwise)."""
    outcome, options = result.outcome, result.options
    repo, issue, comment = options.get("repo"), options.get("issue"), options.get("comment")
    parts = [str(options.get("target") or result.script_name) if not (repo and issue) else
             f"https://github.com/{repo}/issues/{issue}#issuecomment-{comment}" if comment
             else f"{repo}#{issue}"]
    if result.index_url:
        parts += ["--index", result.index_url]
    # The older end first: the good build of a regression, the failing one of a search for
    # its fix (`window_ends`).
    older, newer = ("--bad", "--good") if result.bisection.find_fix else ("--good", "--bad")
    if outcome and outcome.before is not None and outcome.after is not None:
        parts += [older, str(result.version_at(outcome.before))]
        parts += [newer, str(result.version_at(outcome.after))]
    elif result.bisection.good_index is not None:  # the window the user gave
        parts += [older, str(result.version_at(result.bisection.good_index))]
        parts += [newer, str(result.builds[-1].version)]
    elif result.options.get("newer_builds"):  # a newer end given: not the newest nightly
        parts += [newer, str(result.builds[-1].version)]
    parts += bisect_flags(options)
    if result.bisection.find_fix:
        parts.append("--fix")
    return " ".join(["bisect-bot bisect", *(_shell_word(part) for part in parts)])


def continue_command(result: BisectResult) -> str | None:
    """The comment that goes on with a bisection which stopped before its answer (a run cut
    short, rounds of runners run out): the narrowest window its verdicts leave, and the same
    options. None in fix mode, or when no build has failed yet (nothing narrows the window).
    It is the `/bisect` form: a mention would be neutralised in the bot's comment, and a
    copy of it would then not name the bot."""
    if result.outcome is not None or result.bisection.find_fix:
        return None
    verdicts = result.bisection.verdicts
    failing = [index for index, verdict in verdicts.items() if verdict is Verdict.BAD]
    if not failing:
        return None
    bad = min(failing)
    passing = [index for index, verdict in verdicts.items()
               if verdict is Verdict.GOOD and index < bad]
    given = result.bisection.good_index  # the good end given, while no build has passed yet
    good = max(passing) if passing else given if given is not None and given < bad else None
    words = ["/bisect", *([f"good={result.builds[good].version}"] if good is not None else []),
             f"bad={result.builds[bad].version}"]
    options = result.options
    # (option key, the command's word for it, its default); `nproc=` may be the triager's
    # word, which the issue does not hold.
    for key, word, default in (
            ("variant", "variant", None), ("python", "python", None), ("repeat", "repeat", 1),
            ("timeout", "timeout", None), ("match", "match", None), ("metric", "metric", None),
            ("threshold", "threshold", None), ("with", "with", None),
            ("processes", "nproc", None), ("env", "env", None), ("on_timeout", "hang", "skip")):
        value = options.get(key)
        if value is not None and value != default:
            text = f"{value:g}" if isinstance(value, float) else \
                ",".join(value) if isinstance(value, list) else \
                " ".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) \
                else str(value)
            words.append(f"{word}={shlex.quote(text)}")
    if options.get("script_args"):
        words.append(f"args={shlex.quote(shlex.join(options['script_args']))}")
    return " ".join(words)


def _shell_word(text: str) -> str:
    """`text` as one shell word: quoted only when it must be (a `#` inside a word, as in
    owner/repo#N, starts no comment)."""
    return text if re.fullmatch(r"[\w@%+=:,./-][\w@%+=:,./#-]*", text) else shlex.quote(text)


def run_marker(run_id: str) -> str:
    """Names the workflow run that owns a sticky comment; a newer trigger takes it over."""
    safe = re.sub(r"[^\w.-]", "", run_id)
    return f"<!-- torch-bisect-bot:run={safe} -->"


def owner_run(body: str) -> str | None:
    """The run id a sticky comment names; None when it names none (cancelled, or not ours)."""
    found = _RUN_MARKER.search(body)
    return found.group(1) if found else None


def compare_link(result: BisectResult) -> str | None:
    """GitHub's compare view between the last good and first bad builds' commits."""
    outcome = result.outcome
    if outcome is None or outcome.before is None or outcome.after is None:
        return None
    commits = [str((p.info if p else {}).get("git_version") or "")
               for p in (result.probe_for(outcome.before), result.probe_for(outcome.after))]
    if not all(commit.isalnum() for commit in commits):
        return None
    return compare_url(commits[0], commits[1])


def metric_chart(result: BisectResult) -> str:
    """A Mermaid `xychart-beta` of the metric over the builds tested (GitHub renders it)."""
    points = [(p.version, p.metric) for p in sorted(result.probes, key=lambda p: p.index)
              if p.metric is not None and not p.variant_env]
    if not points:
        return ""
    names = ", ".join(f'"{_short(version)}"' for version, _ in points)
    values = ", ".join(f"{value:.6g}" for _, value in points)
    return (f"### Metric by build\n\n```mermaid\nxychart-beta\n"
            f'    title "metric by build"\n    x-axis [{names}]\n    y-axis "metric"\n'
            f"    line [{values}]\n```")


def arguments_line(result: BisectResult) -> str:
    """The reproducer's own arguments, where it ran with some (`python repro.py --size 8`),
    or why those of the issue's command were not used."""
    args = result.options.get("script_args")
    refused = result.options.get("args_refused")
    if not args and refused:  # Markdown of ours, the issue's words in code spans
        return (f"Script arguments: none; {refused}. Give them with `args=\"...\"` in a "
                "`/bisect` command (`--args='...'` locally).")
    if not args:
        return ""
    return f"Script arguments, in every run: {code_span(shlex.join(args))}"


def runner_line(result: BisectResult) -> str:
    """Where the builds ran: GPU, CUDA and triton as the newest probed build reported them."""
    probed = [p for p in result.probes if p.info.get("torch") and not p.variant_env]
    if not probed:
        return ""
    info = max(probed, key=lambda p: p.index).info
    gpu = info.get("gpu") or ("no GPU visible" if info.get("cuda_available") is False else "")
    parts = [f"Python {info.get('python')}" if info.get("python") else "",
             f"CUDA {info['cuda']}" if info.get("cuda") else "",
             f"triton {info['triton']}" if info.get("triton") else "", str(gpu)]
    return "Ran on: " + ", ".join(plain(part) for part in parts if part)


def _short(version: str) -> str:
    """`2.13.0.dev20260521+cpu` -> `05-21`: the axis has room for dates, not versions."""
    found = re.search(r"dev(\d{4})(\d{2})(\d{2})", version)
    return f"{found[2]}-{found[3]}" if found else version.replace('"', "")


def render_markdown(result: BisectResult, tail_limit: int = 4000, extra: str = "",
                    run_id: str = "", limit: int | None = GITHUB_COMMENT_LIMIT,
                    compare_line: bool = True, stopped: bool = False) -> str:
    """The comment body. Past GitHub's size limit the tails shrink first, then the builds
    table keeps the rows nearest the answer, then the extra sections are cut, with a word
    (a cut in the middle of the table lost the first bad build's row and the rerun command).
    `limit` None: a file, whole. `compare_line` False: `extra` has a commit section, which
    gives the compare link (on main, where it could map the nightlies). `stopped`: as for
    `headline`."""
    rows: int | None = None
    while True:
        body = _markdown(result, tail_limit, extra, run_id, rows, compare_line, stopped)
        if limit is None or len(body) <= limit:
            return body
        if tail_limit > 0:
            tail_limit = tail_limit // 2 if tail_limit > 200 else 0
        elif rows is None or rows > 20:
            rows = 200 if rows is None else rows // 2
        elif extra and not extra.startswith("_(left out"):
            # Whole or not at all: a cut could leave a <details> or a fence open.
            extra = (f"_(left out: the triage and commit sections, which would take this "
                     f"comment past GitHub's limit of {limit:,} characters; the rerun command "
                     "below gives them)_")
        else:
            return body[:limit]


def _markdown(result: BisectResult, tail_limit: int, extra: str, run_id: str = "",
              rows: int | None = None, compare_line: bool = True, stopped: bool = False
              ) -> str:
    sections = [MARKER + (run_marker(run_id) if run_id else ""),
                f"## {headline(result, stopped)}"]
    if result.outcome and result.outcome.note and result.outcome.status is not Status.CANNOT_TEST:
        sections.append(f"_{plain(_note(result))}_")
    sections += _hints(result)
    if result.signature:
        sections.append(f"Failure followed: {code_span(result.signature[:200])}")
    link = compare_link(result) if compare_line else None
    if link:
        # Their git_versions are nightly-branch commits, one per nightly: GitHub's compare
        # shows the diff of main between them, but lists only the nightly release commits.
        sections.append(f"Diff between them (their nightly-branch commits; the main commits in "
                        f"between are not listed there): {link}")
    if extra:
        sections.append(extra)
    where = "\n\n".join(line for line in (runner_line(result), arguments_line(result)) if line)
    sections.append(f"### Builds tested\n\n{where + chr(10) * 2 if where else ''}"
                    f"{probe_table(result, rows)}")
    chart = metric_chart(result)
    if chart:
        sections.append(chart)
    sections += _tails(result, tail_limit)
    sections.append(f"### Rerun locally\n\n{fenced(rerun_command(result), 'sh')}")
    return "\n\n".join(sections) + "\n"


def render_terminal(result: BisectResult) -> str:
    outcome = result.outcome
    note = [_note(result)] if outcome and outcome.note and outcome.status in (
        Status.AMBIGUOUS, Status.NOT_A_REGRESSION) else []
    ran_on = runner_line(result)  # none before any probe ran (a blocker found first)
    lines = [headline(result).replace("`", ""), *note,
             *(h.replace("`", "") for h in _hints(result)), *([ran_on] if ran_on else [])]
    table = [f"  {probe.verdict.value:5} {probe.version:34} {probe.seconds:7.1f} s  "
             f"{probe.reason[:70]}"
             for probe in sorted(result.probes, key=lambda p: p.index) if not probe.variant_env]
    return visible("\n".join([*lines, "", *table] if table else lines))


def render_json(result: BisectResult) -> dict[str, Any]:
    return result.to_dict()
