"""The Actions runtime adapter, with real webhook payloads and files laid out as a runner does."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.adapters.actions import (
    ActionsEnvironmentError,
    append_summary,
    format_output,
    read_event,
    write_outputs,
)

WEBHOOKS = Path(__file__).resolve().parents[1] / "data" / "webhooks"


def parse_output_file(text: str) -> dict[str, str]:
    """Read GITHUB_OUTPUT the way the Actions runner does: `name=value` or a heredoc block."""
    outputs: dict[str, str] = {}
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line:
            continue
        heredoc = "<<" in line and ("=" not in line or line.index("<<") < line.index("="))
        if not heredoc:
            name, _, value = line.partition("=")
            outputs[name] = value
            continue
        name, _, delimiter = line.partition("<<")
        end = lines.index(delimiter, index)  # ValueError: the block never ends
        outputs[name] = "\n".join(lines[index:end])
        index = end + 1
    return outputs


def test_reads_a_real_issues_labeled_event() -> None:
    environ = {"GITHUB_EVENT_NAME": "issues",
               "GITHUB_EVENT_PATH": str(WEBHOOKS / "issues.labeled.1.json")}
    event = read_event(environ)
    assert (event.name, event.action) == ("issues", "labeled")
    assert event.payload["label"]["name"] == "bug"
    assert isinstance(event.payload["issue"]["number"], int)


def test_reads_a_real_issue_comment_created_event() -> None:
    environ = {"GITHUB_EVENT_NAME": "issue_comment",
               "GITHUB_EVENT_PATH": str(WEBHOOKS / "issue_comment.created.1.json")}
    event = read_event(environ)
    assert (event.name, event.action) == ("issue_comment", "created")
    assert event.payload["comment"]["user"]["login"]
    assert event.payload["comment"]["body"]


def test_schedule_event_has_no_action(tmp_path: Path) -> None:
    path = tmp_path / "event.json"
    path.write_text('{"schedule": "0 3 * * *"}')
    event = read_event({"GITHUB_EVENT_NAME": "schedule", "GITHUB_EVENT_PATH": str(path)})
    assert event.action is None


def test_outside_actions_says_which_variable_is_missing() -> None:
    with pytest.raises(ActionsEnvironmentError, match="GITHUB_EVENT_NAME"):
        read_event({})
    with pytest.raises(ActionsEnvironmentError, match="GITHUB_OUTPUT"):
        write_outputs({}, {"verdict": "BAD"})


def test_outputs_survive_newlines_and_lookalike_syntax(tmp_path: Path) -> None:
    output = tmp_path / "output"
    output.write_text("earlier=kept\n")
    values = {
        "first_bad": "2.13.0.dev20260521",
        "report": "## Regression\nfirst_bad=forged\nEOF\nname<<EOF\n",
        "empty": "",
    }
    write_outputs({"GITHUB_OUTPUT": str(output)}, values)
    assert parse_output_file(output.read_text()) == {"earlier": "kept", **values}


@given(st.text(alphabet=st.characters(exclude_characters="\r"), max_size=200))
def test_any_value_round_trips(value: str) -> None:
    assert parse_output_file(format_output("value", value)) == {"value": value}


def test_refuses_a_value_containing_the_delimiter() -> None:
    with pytest.raises(ValueError, match="delimiter"):
        format_output("x", "a\nFIXED\nb", make_delimiter=lambda: "FIXED")
    with pytest.raises(ValueError, match="invalid output name"):
        format_output("a\nb", "v")


def test_summary_is_appended(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    environ = {"GITHUB_STEP_SUMMARY": str(summary)}
    append_summary(environ, "## Bisection")
    append_summary(environ, "| build | verdict |\n| --- | --- |\n")
    assert summary.read_text() == "## Bisection\n| build | verdict |\n| --- | --- |\n"
