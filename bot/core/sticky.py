"""The sticky comment besides a verdict: queued, cancelled, cannot start, failed."""

from __future__ import annotations

import re
import shlex

from bot.core.builds import Build, same_commit
from bot.core.job_plan import Settings
from bot.core.report import GITHUB_COMMENT_LIMIT, MARKER, run_marker
from bot.core.safe_markdown import code_span, fenced, neutralise, plain


def _body(run_id: str, sections: list[str], marks: str = "") -> str:
    head = MARKER + (run_marker(run_id) if run_id else "") + marks
    return ("\n\n".join([head, *sections]) + "\n")[:GITHUB_COMMENT_LIMIT]


def _packages(settings: Settings, imports: tuple[str, ...]) -> str | None:
    """What is installed beside the build: `with=`, else the guess from the imports."""
    if settings.packages:
        return ", ".join(f"`{neutralise(p)}`" for p in settings.packages) + " (`with=`)"
    if imports:
        return (", ".join(f"`{neutralise(p)}`" for p in imports)
                + " (from the reproducer's imports; `with=` names others)")
    return None


def _settings_table(settings: Settings, imports: tuple[str, ...] = (),
                    env: tuple[tuple[str, str], ...] = (), processes: str | None = None,
                    guessed: bool = False, args: tuple[str, ...] = (),
                    args_refused: str | None = None) -> str:
    rows = [
        ("index", f"`{settings.index_url}`"),
        ("variant", f"`{settings.variant}`"
                    f"{_from_issue(settings.variant, settings.issue_variant, 'build')}"),
        ("Python", f"`{settings.python}`"
                   f"{_from_issue(settings.python, settings.issue_python, 'environment')}"),
        ("timeout per run", f"{settings.timeout_s} s"),
        ("runs per build", str(settings.repeat)),
        ("mode", "find the fix" if settings.find_fix else "find the regression"),
    ]
    if settings.match:
        rows.append(("bad when the output matches", f"`{neutralise(settings.match)}`"))
    packages = _packages(settings, imports)
    if packages:
        rows.append(("installed beside torch", packages))
    if env:
        words = ", ".join(f"`{neutralise(name)}={neutralise(value)}`" for name, value in env)
        rows.append(("variables", f"{words} (set for every run)"))
    if processes is not None:
        why = ("a guess: the script reads torchrun's variables and the issue names no "
               "count; `nproc=N` sets it" if guessed else
               "`--standalone`: the ranks meet on the run's own loopback only")
        rows.append(("launched with",
                     f"`torchrun --nproc_per_node={neutralise(processes)}` ({why})"))
    if args:
        shown = code_span(shlex.join(args)).replace("|", "\\|")
        rows.append(("script arguments", f"{shown} (the reproducer's argv in every run; "
                     "`args=` sets others)"))
    elif args_refused:  # Markdown of ours, the issue's words in code spans
        rows.append(("script arguments", "none: " + args_refused.replace("|", "\\|")
                     + "; `args=\"...\"` gives them"))
    return "| setting | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def _from_issue(chosen: str, reported: str | None, where: str) -> str:
    """Where a setting the issue reports came from: the issue's `where`, or the default
    because the index has no nightlies of the issue's."""
    if reported is None:
        return ""
    if reported == chosen:
        return f" (the issue's {where})"
    return f" (the issue's `{reported}` has no nightlies on the index)"


def _window(builds: tuple[Build, ...] | None, settings: Settings) -> str:
    if builds is None:
        good, bad = settings.good or "searched back from the bad end", settings.bad or "latest"
        return f"Nightly window: good `{good}`, bad `{bad}` (resolved when the run starts)."
    said = (f" The good end is from the issue: \"{neutralise(settings.good_said)}\"."
            if settings.good_said and settings.good else "")
    newest = builds[-1].version
    if settings.issue_bad and same_commit(newest, settings.issue_bad):
        said += " The bad end is the nightly the issue reports failing on."
    return (f"Nightly window: {len(builds)} builds, `{builds[0].version}` … "
            f"`{builds[-1].version}`.{said}")


def about_the_ends(notes: tuple[str, ...]) -> str:
    """What the plan job said of the window's ends, as the comment shows it."""
    return "About the window's ends:\n\n" + "\n".join(f"- {plain(note)}" for note in notes)


def logs_line(run_url: str) -> str:
    """Where each probe's install and output are: the workflow run's page ("" for none).
    The comment holds only the tails of the builds nearest the answer."""
    return (f"_Every probe's install and output: [the workflow run's log]({run_url})._"
            if run_url else "")


def render_queued(run_id: str, requested_by: str, settings: Settings,
                  builds: tuple[Build, ...] | None, source: str,
                  imports: tuple[str, ...] = (), env: tuple[tuple[str, str], ...] = (),
                  processes: str | None = None, processes_guessed: bool = False,
                  platform: str | None = None, notes: tuple[str, ...] = (),
                  args: tuple[str, ...] = (), args_refused: str | None = None,
                  run_url: str = "") -> str:
    """Acknowledges a request: what will be bisected, with which settings, for whom.
    `notes`: what was said of the window's ends (one of the issue's that was not used, and
    why), which only the job's log held before. `args_refused`: why the arguments of the
    issue's command were not used."""
    other = (f" The issue reports {platform} (its collect_env `OS:` line); the builds are "
             f"Linux ones, where a bug of {platform} alone does not show." if platform else "")
    return _body(run_id, [
        "## Bisection queued",
        f"Requested by {neutralise('@' + requested_by)}. The reproducer is the "
        f"{neutralise(source)}; this comment is updated with the result. This run does not "
        "read edits of the issue made from now on: comment `/bisect` again to use them."
        + (f" It runs in [this workflow run]({run_url})." if run_url else ""),
        _window(builds, settings) + other,
        *([about_the_ends(notes)] if notes else []),
        _settings_table(settings, imports, env, processes, processes_guessed, args,
                        args_refused),
    ])


def render_cancelled(by: str, note: str | None = None) -> str:
    """A cancelled bisection: no run owns the comment any more, so no report overwrites it.
    `note`: what became of its workflow run."""
    said = f" {neutralise(note)}" if note else ""
    return _body("", ["## Bisection cancelled", f"Cancelled by {neutralise('@' + by)}.{said} "
                      "Comment a bisect command (or remove the label and add it again) to "
                      "start a new one."])


# What started a bisection that could not start (or test), in its comment: an edit of the
# issue starts it again only after the trigger label (whose adder's role was checked, and
# which has no options to lose). After a command it does not: the edit's author may lack the
# role, and the command's options (repeat=, good=) would not come with the edit; the comment
# tells its author to comment it again.
_STARTED_BY = re.compile(r"<!-- torch-bisect-bot:started-by=(label|command) -->")


def started_by(body: str) -> str | None:
    """"label" or "command": what started the bisection whose cannot-start comment this is;
    None for another comment (or one written before the bot said)."""
    found = _STARTED_BY.search(body)
    return found.group(1) if found else None


def render_cannot_start(run_id: str, problem: str, usage_hint: str,
                        label: str = "bisect", waiting: str = "bisect: cannot-test",
                        by_command: bool = False) -> str:
    """Why the bot cannot bisect this issue yet, and what to change. `by_command`: a
    comment's command started it, which an edit of the issue does not start again."""
    again = ("Mend it (in the issue, or in the command, whose comment may hold the script) "
             "and comment the command again, with corrected options. " if by_command else
             f"Edit the issue: while it has the `{neutralise(label)}` and "
             f"`{neutralise(waiting)}` labels, the bot tries again after each edit that "
             "changes the reproducer or what the issue says about it (its versions, Python, "
             "variables). Or comment a bisect command (with corrected options). ")
    started = f"<!-- torch-bisect-bot:started-by={'command' if by_command else 'label'} -->"
    return _body(run_id, ["## Cannot bisect this issue yet", neutralise(sentence(problem)),
                          again + usage_hint], started)


def sentence(text: str) -> str:
    """A problem said on its own: most are written to follow "I cannot start this bisection:"
    ("the reproducer uses CUDA, ..."), so begin it with a capital and end it with a stop."""
    text = stopped(text)
    return text[0].upper() + text[1:] if text[:1].islower() else text


def stopped(text: str) -> str:
    """`text` ending as a sentence does: its own stop, question or exclamation mark, else a
    full stop (a problem said after "I cannot start this bisection:")."""
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def render_failed(run_id: str, why: str, log_tail: str = "", run_url: str = "") -> str:
    """The run ended without an outcome (crashed, timed out, cancelled by Actions)."""
    sections = ["## Bisection failed", neutralise(why), *([logs_line(run_url)] if run_url else [])]
    if log_tail:
        sections.append(f"<details><summary>Log</summary>\n\n{fenced(log_tail[-4000:])}"
                        "\n\n</details>")
    return _body(run_id, sections)
