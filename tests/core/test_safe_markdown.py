"""What a reproducer prints reaches the bot's comment as text: it pings, links, references and
opens nothing, and it cannot close the code around it."""

from __future__ import annotations

import re
from dataclasses import replace

from bot.core.commands import Action, Command
from bot.core.config import Config
from bot.core.issue_text import extract_reproducer
from bot.core.job_plan import JobPlan, settings, workflow_run_url
from bot.core.report import render_markdown
from bot.core.safe_markdown import cell, code_span, plain
from bot.jobs.github_report import render_outcome
from tests.core.test_report import bisect

HOSTILE = ("RuntimeError: `x` <details open><summary>@pytorch/team</summary> "
           "<!-- torch-bisect-bot:report --> [click](https://evil.example) ![i](https://evil/x.png) "
           "&#64;someone fixes pytorch/pytorch#1 and #2 | cell")


def _outside_code(body: str) -> str:
    """The Markdown outside fenced blocks and code spans, where text is interpreted."""
    body = re.sub(r"^(`{3,})[^\n]*\n.*?^\1\s*$", "", body, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", body, flags=re.DOTALL)


def _unsafe(body: str) -> list[str]:
    """What in a rendered comment would act: a live mention, an issue reference, raw HTML, a
    link or an image made of the hostile text."""
    body = _outside_code(body)
    found = []
    if re.search(r"(?<![\w`])@(?=[A-Za-z])", body):
        found.append("mention")
    if re.search(r"(?<![\w])#\d", body):
        found.append("reference")
    for raw in ("<details open>", "<!-- torch-bisect-bot:report --> [", "&#64;someone"):
        if raw in body:
            found.append(raw)
    if re.search(r"(?<!\\)\]\(https://evil", body):
        found.append("link")
    return found


def test_plain_text_and_cells_act_on_nothing() -> None:
    for text in (plain(HOSTILE), cell(HOSTILE, 400)):
        assert _unsafe(text) == [], text
    assert "\\|" in cell(HOSTILE, 400) and "|" not in plain(HOSTILE).replace("|", "", 1)


def test_a_code_span_is_not_closed_by_the_backticks_inside() -> None:
    assert code_span("a `b` ``c``") == "``` a `b` ``c`` ```"
    assert code_span("no ticks") == "`no ticks`"
    assert "@\u200d" in code_span("@team")


def test_a_failure_message_in_the_report_acts_on_nothing() -> None:
    result = bisect(5)
    hostile = replace(result, signature=HOSTILE,
                      probes=tuple(replace(p, reason=HOSTILE) for p in result.probes))
    body = render_markdown(hostile)
    assert _unsafe(body) == [], _unsafe(body)
    # the bot's own marker only: the reproducer's is shown as text, or inside code
    assert _outside_code(body).count("<!-- torch-bisect-bot:report -->") == 1


def test_the_report_job_renders_the_triage_from_its_data_not_the_run_job_s_markdown() -> None:
    reproducer = extract_reproducer("```python\nimport torch\nprint(torch.ones(2))\n```")
    plan = JobPlan("o/r", 7, 11, "run-1", "someone", reproducer,
                   settings(Command(Action.BISECT), Config()))
    outcome = bisect(5).to_dict()
    outcome["triage_markdown"] = "### Triage\n\n@pytorch/compiler-team please look"
    outcome["triage"] = {"triage": {
        "version": "2.13.0.dev20260515+cu130",
        "findings": [{"kind": "subsystem", "text": "fails only with inductor; cc @someone"}],
        "labels": ["module: inductor"],
        "runs": [{"variant": "inductor", "verdict": "bad", "reason": HOSTILE}]}}
    body = render_outcome(plan, outcome, Config()).body
    assert "compiler-team" not in body and _unsafe(body) == [], _unsafe(body)
    assert "fails only with inductor; cc @\u200dsomeone" in body
    outcome["triage"] = {"triage": {"version": 3}}
    assert "The triage could not be read" in render_outcome(plan, outcome, Config()).body


def test_the_workflow_run_is_linked_where_it_is_a_run_page_and_nowhere_else() -> None:
    reproducer = extract_reproducer("```python\nimport torch\nprint(torch.ones(2))\n```")
    environ = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r",
               "GITHUB_RUN_ID": "1234"}
    url = workflow_run_url(environ)
    assert url == "https://github.com/o/r/actions/runs/1234"
    plan = JobPlan("o/r", 7, 11, "run-1", "someone", reproducer,
                   settings(Command(Action.BISECT), Config()), run_url=url)
    assert JobPlan.from_dict(plan.to_dict()).run_url == url
    found = render_outcome(plan, bisect(5).to_dict(), Config()).body
    failed = render_outcome(plan, {"error": "the runner was lost"}, Config()).body
    for body in (found, failed):
        assert f"[the workflow run's log]({url})" in body and _unsafe(body) == []
    # Outside Actions, or a value that is no run page (a link that breaks out of its
    # Markdown, a script URL), nothing is linked.
    assert workflow_run_url({}) == ""
    for bad in ({**environ, "GITHUB_REPOSITORY": "o/r) [x](https://evil.example"},
                {**environ, "GITHUB_SERVER_URL": "javascript:alert(1)//x"}):
        assert workflow_run_url(bad) == ""
    damaged = {**plan.to_dict(), "run_url": "https://evil.example/(x)"}
    assert JobPlan.from_dict(damaged).run_url == ""
    assert "workflow run's log" not in render_outcome(
        JobPlan.from_dict(damaged), {"error": "lost"}, Config()).body
