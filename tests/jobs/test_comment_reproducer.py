"""A bisect command's comment may hold the reproducer itself, a triager's reduced script.

The issue's body still says what it says (the nightly that failed, the Python, what worked);
the report's rerun names the comment by its URL, and `bisect-bot bisect URL` reads it again.
Through the fake GitHub (checked against GitHub's OpenAPI description) and the stand-in index.
"""

from __future__ import annotations

import json
from importlib import resources

from bot.core.bisection import Bisection
from bot.core.config import Config
from bot.core.issue_text import extract_from_comment
from bot.core.job_plan import JobPlan
from bot.jobs.cli import main
from bot.jobs.github_report import render_outcome
from tests.jobs.github_helpers import Jobs, comment_event

PROSE_ONLY = ("Compiled cumsum gives wrong numbers on the nightly; it works in torch 2.12.0.\n\n"
              "### Versions\n\nPyTorch version: 2.13.0.dev20260525+cpu\n"
              "Python version: 3.11.7 (main) [GCC 13.3.0]\n")


def _script() -> str:
    """The bundled cumsum reproducer, read from the package (nothing written)."""
    return resources.files("bot.demo").joinpath("data", "cumsum_repro.py").read_text()


def _command(good: str) -> str:
    return f"@torch-bisect-bot bisect good={good}\n\nReduced:\n\n```python\n{_script()}```\n"


def test_the_comment_s_script_with_the_body_s_facts():
    found = extract_from_comment(_command("2026-05-19"), PROSE_ONLY, "cumsum is off")
    assert found is not None and found.script == _script()
    assert found.reported_version == "2.13.0.dev20260525+cpu"  # from the body
    assert found.reported_python == "3.11"
    assert (found.reported_good, found.good_said) == ("2.12.0", "works in torch 2.12.0")
    assert extract_from_comment("@torch-bisect-bot bisect good=2026-05-19", PROSE_ONLY) is None


def test_a_command_s_comment_gives_the_reproducer_and_its_rerun_reads_it_again(
        tmp_path, github_server, github_repo, monkeypatch, index_server, cache_dir, mirror,
        capsys):
    jobs = Jobs(tmp_path, github_server, monkeypatch, index_server.url)
    issue = github_repo.add_issue("compiled cumsum is off", PROSE_ONLY)
    github_repo.set_role("alice", "triage")
    asked = github_repo.add_comment(issue.number, _command("2026-05-19"), author="alice")
    event = comment_event(issue.number, asked.body)
    event["comment"]["id"] = asked.id
    assert jobs.plan("issue_comment", event)
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["reproducer"]["script"] == _script()
    assert plan["reproducer_comment"] == asked.id
    assert plan["settings"]["good"] == "2026-05-19"  # the command's, over the body's words
    sticky = next(c.body for c in issue.comments if c.author.endswith("[bot]"))
    assert "The reproducer is the fenced block 1 (python) of the comment that asked" in sticky

    done = jobs.run(cache_dir, "--no-triage")
    assert done.returncode == 0, done.stderr[-3000:]
    jobs.report()
    report = next(c.body for c in issue.comments if c.author.endswith("[bot]"))
    url = f"https://github.com/pytorch/pytorch/issues/{issue.number}#issuecomment-{asked.id}"
    assert f"bisect-bot bisect {url} --index" in report and mirror.first_bad in report

    # Had it stopped early, going on needs the comment's script again.
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    whole = Bisection.from_json(outcome["bisection"])
    cut = Bisection(whole.size, whole.good_index)
    for index, verdict in whole.results[:2]:
        cut = cut.record(index, verdict)
    outcome.update(bisection=cut.to_json())
    shown = render_outcome(JobPlan.from_dict(plan), outcome, Config()).body
    assert "comment with the reproducer under it in a ```python block, as before" in shown

    # The rerun's target, on one's own machine: the comment's script, the issue's facts.
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    assert main(["extract", url]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["script"] == _script() and shown["reported_good"] == "2.12.0"
    markdown = tmp_path / "local.md"
    assert main(["bisect", url, "--index", index_server.variant_url("cpu"),
                 "--cache-dir", str(cache_dir), "--no-default-packages", "--no-triage",
                 "--no-commit-tier", "--good", "2026-05-19", "--bad", "2026-05-25",
                 "--work-dir", str(tmp_path / "work"), "--markdown", str(markdown)]) == 0
    assert mirror.first_bad in markdown.read_text() and f"bisect-bot bisect {url} " in (
        markdown.read_text())


def test_a_comment_without_a_reproducer_named_by_url_is_told(tmp_path, github_server,
                                                             github_repo, monkeypatch, capsys):
    issue = github_repo.add_issue("t", PROSE_ONLY)
    note = github_repo.add_comment(issue.number, "Same here on 2.13.")
    monkeypatch.setenv("GITHUB_API_URL", github_server.url)
    monkeypatch.setenv("GITHUB_TOKEN", "test-token")
    url = f"https://github.com/pytorch/pytorch/issues/{issue.number}#issuecomment-{note.id}"
    assert main(["extract", url]) == 2
    err = capsys.readouterr().err
    assert f"comment {note.id} of pytorch/pytorch#{issue.number} holds no Python reproducer" in err
    assert main(["extract", url.replace(str(note.id), "999999")]) == 2
    assert "has no comment 999999" in capsys.readouterr().err
