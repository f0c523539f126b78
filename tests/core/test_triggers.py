"""Webhook payloads (the real examples, adapted) -> Decision."""

from __future__ import annotations

import pytest

from bot.core.commands import Action
from bot.core.config import Config, parse_config
from bot.core.triggers import Kind, decide, permitted, refusal
from tests.jobs.github_helpers import comment_event, edited_event, labeled_event

CONFIG = Config()


def test_trigger_label_is_a_bisect_whose_sender_s_role_is_checked():
    """An issue template adds its labels for whoever opens the issue."""
    decision = decide("issues", labeled_event(7), CONFIG)
    assert decision.kind is Kind.BISECT and decision.check_permission
    assert (decision.repo, decision.issue, decision.actor) == ("pytorch/pytorch", 7, "triager")
    assert decision.command is not None and decision.command.action is Action.BISECT


def test_other_labels_and_custom_trigger():
    assert decide("issues", labeled_event(7, "bug"), CONFIG).kind is Kind.IGNORE
    custom = parse_config("labels: {trigger: needs-bisect}")
    assert decide("issues", labeled_event(7, "needs-bisect"), custom).kind is Kind.BISECT


SCRIPT = "```python\nimport torch\nassert torch.ones(2).sum() == 2\n```\n"


def test_an_edit_retries_only_when_it_changes_what_the_bot_reads():
    """A mended typo or a "cc @someone" starts no second GPU run to the same answer."""
    waiting = ("bisect", "bisect: cannot-test")
    added = edited_event(7, waiting, "no code yet", after=f"no code yet\n\n{SCRIPT}")
    assert decide("issues", added, CONFIG).kind is Kind.BISECT
    for before, after in ((f"Typo teh.\n\n{SCRIPT}", f"Typo the.\n\n{SCRIPT}"),
                          (SCRIPT, f"{SCRIPT}\ncc @someone"), ("no code", "still no code!")):
        decision = decide("issues", edited_event(7, waiting, before, after=after), CONFIG)
        assert decision.kind is Kind.IGNORE and "changed nothing" in decision.message
    # an edit whose former text the payload lacks counts as a change
    unknown = edited_event(7, waiting, SCRIPT, after=SCRIPT)
    unknown["changes"] = {}
    assert decide("issues", unknown, CONFIG).kind is Kind.BISECT
    # a new good end in the words is a change
    assert decide("issues", edited_event(7, waiting, SCRIPT, after=f"Works in torch 2.12.0.\n"
                                         f"{SCRIPT}"), CONFIG).kind is Kind.BISECT


def test_an_edit_retries_only_an_issue_the_bot_is_waiting_on():
    waiting = ("bug", "bisect", "bisect: cannot-test")
    decision = decide("issues", edited_event(7, waiting, after=SCRIPT), CONFIG)
    # the plan job checks that the label started the bisection it restarts
    assert decision.kind is Kind.BISECT and not decision.check_permission and decision.edited
    assert decision.command is not None and decision.issue == 7
    for labels in (("bisect",), ("bisect: cannot-test",), ("bisect", "bisect: found"), ()):
        assert decide("issues", edited_event(7, labels), CONFIG).kind is Kind.IGNORE, labels
    custom = parse_config("labels: {trigger: needs-bisect, cannot_test: 'bisect: blocked'}")
    assert decide("issues", edited_event(7, ("needs-bisect", "bisect: blocked"), after=SCRIPT),
                  custom).kind is Kind.BISECT
    assert decide("issues", edited_event(7, waiting), custom).kind is Kind.IGNORE


@pytest.mark.parametrize(("body", "kind", "check"), [
    ("@torch-bisect-bot bisect good=2.12.0 repeat=3", Kind.BISECT, True),
    ("/bisect cancel", Kind.CANCEL, True),
    ("/bisect help", Kind.HELP, False),
    ("@torch-bisect-bot bisect colour=red", Kind.USAGE, True),
    ("thanks, looks fixed", Kind.IGNORE, False),
    ("```\n/bisect\n```", Kind.IGNORE, False),
])
def test_comments(body, kind, check):
    decision = decide("issue_comment", comment_event(3, body), CONFIG)
    assert decision.kind is kind and decision.check_permission is check
    if kind is Kind.USAGE:
        assert "colour" in decision.message and "**Usage**" in decision.message


@pytest.mark.parametrize(("author", "kind"), [("torch-bisect-bot[bot]", "Bot"),
                                               ("github-actions[bot]", "Bot"),
                                               ("torch-bisect-bot", "User")])
def test_bots_and_our_own_comments_are_ignored(author, kind):
    event = comment_event(3, "/bisect", author, kind)
    assert decide("issue_comment", event, CONFIG).kind is Kind.IGNORE


def test_pull_requests_edits_and_foreign_events_are_ignored():
    event = comment_event(3, "/bisect")
    event["issue"]["pull_request"] = {"url": "https://api.github.com/x"}
    assert decide("issue_comment", event, CONFIG).kind is Kind.IGNORE
    edited = comment_event(3, "/bisect") | {"action": "edited"}
    assert decide("issue_comment", edited, CONFIG).kind is Kind.IGNORE
    assert decide("push", {}, CONFIG).kind is Kind.IGNORE


def test_a_malformed_command_is_a_comment_s_not_a_label_s():
    """Its refusal, to a commenter without the role, speaks of a comment."""
    decision = decide("issue_comment", comment_event(7, "/bisect good=yesterday"), CONFIG)
    assert decision.kind is Kind.USAGE and decision.check_permission
    assert not decision.labeled and decision.comment_id > 0
    assert decision.comment == "/bisect good=yesterday"
    assert decide("issues", labeled_event(7), CONFIG).labeled


@pytest.mark.parametrize(("role", "allowed"), [("admin", True), ("maintain", True),
                                               ("write", True), ("triage", True),
                                               ("read", False), ("none", False),
                                               ("custom-role", False)])
def test_permission_ladder(role, allowed):
    assert permitted(role, "triage") is allowed


def test_refusal_names_the_role_and_the_label():
    text = refusal("mallory", parse_config("min_permission: write"))
    assert "`write`" in text and "`bisect`" in text
