"""A webhook payload -> what the bot should do about it (pure: the jobs act on the Decision)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.core.commands import Action, Command, parse_comment, usage
from bot.core.config import ROLES, Config
from bot.core.errors import UserError
from bot.core.issue_text import Reproducer, extract_reproducer


class Kind(enum.Enum):
    """The kind of reaction an event calls for."""

    IGNORE = "ignore"
    BISECT = "bisect"
    HELP = "help"
    CANCEL = "cancel"
    USAGE = "usage"  # a malformed command: reply with what was wrong and the usage


@dataclass(frozen=True)
class Decision:
    """What to do, for whom, and whether the actor's permission must be checked first."""

    kind: Kind
    repo: str = ""
    issue: int = 0
    actor: str = ""
    command: Command | None = None
    check_permission: bool = False  # a comment: ask the API for the actor's role first
    message: str = ""  # the reply for USAGE; why, for IGNORE (logs only)
    comment_id: int = 0  # the comment that holds the command, which may hold a reproducer too
    comment: str = ""
    # The trigger label was added: a refusal then speaks of the label (which the issue form
    # adds for its reporter), not of a command.
    labeled: bool = False
    # An edit of an issue the bot waits on: the plan job restarts it only when the comment
    # says the label started it (`sticky.started_by`).
    edited: bool = False


def decide(event_name: str, payload: Mapping[str, Any], config: Config) -> Decision:
    """The reaction to one event; never raises on a payload GitHub documents."""
    issue = payload.get("issue")
    if not isinstance(issue, Mapping):
        return Decision(Kind.IGNORE, message=f"`{event_name}` event without an issue")
    where = _where(payload, issue)
    if issue.get("pull_request"):
        return Decision(Kind.IGNORE, *where, message="pull requests are not bisected")
    if event_name == "issues":
        return _labeled(payload, config, where)
    if event_name == "issue_comment":
        return _commented(payload, config, where)
    return Decision(Kind.IGNORE, *where, message=f"`{event_name}` events are not handled")


def _field(payload: Mapping[str, Any], name: str, key: str) -> Any:
    """payload[name][key], or None where a part is missing or not an object."""
    part = payload.get(name)
    return part.get(key) if isinstance(part, Mapping) else None


def _where(payload: Mapping[str, Any], issue: Mapping[str, Any]) -> tuple[str, int, str]:
    number = issue.get("number")
    return (str(_field(payload, "repository", "full_name") or ""),
            number if isinstance(number, int) and not isinstance(number, bool) else 0,
            str(_field(payload, "sender", "login") or ""))


def _labeled(payload: Mapping[str, Any], config: Config, where: tuple[str, int, str]) -> Decision:
    # Only people with triage access or more can add labels by hand, but an issue template
    # adds its labels for whoever opens the issue (.github/ISSUE_TEMPLATE/bisect.yml adds the
    # trigger), so the sender's role is checked as a commenter's is.
    if payload.get("action") == "edited":
        return _edited(payload, config, where)
    label = _field(payload, "label", "name") or ""
    if payload.get("action") != "labeled" or str(label).lower() != config.labels.trigger.lower():
        return Decision(Kind.IGNORE, *where, message=f"not the `{config.labels.trigger}` label")
    return Decision(Kind.BISECT, *where, command=Command(Action.BISECT), check_permission=True,
                    labeled=True)


def _edited(payload: Mapping[str, Any], config: Config, where: tuple[str, int, str]) -> Decision:
    """An issue the bot could not bisect yet, edited (to add the reproducer, say): it tries
    again, as the trigger label a triager added is still there, where that label started the
    bisection (the plan job reads it in the bot's comment). Any other edit is ignored."""
    labels = _field(payload, "issue", "labels")
    names = {str(label.get("name", "")).lower() for label in labels
             if isinstance(label, Mapping)} if isinstance(labels, list) else set()
    wanted = {config.labels.trigger.lower(), config.labels.cannot_test.lower()}
    if not wanted <= names:
        return Decision(Kind.IGNORE, *where, message="an edit of an issue the bot is not "
                        "waiting on")
    if not _reads_differently(payload):
        return Decision(Kind.IGNORE, *where, message="the edit changed nothing the bisection "
                        "reads (its reproducer, versions, Python or variables)")
    return Decision(Kind.BISECT, *where, command=Command(Action.BISECT), edited=True)


def _reads_differently(payload: Mapping[str, Any]) -> bool:
    """Whether an edit changed what the bot reads from the issue: a typo mended in the prose
    or a "cc @someone" starts no second GPU run to the same answer. An edit whose former
    text the payload lacks counts as a change."""
    changes = payload.get("changes")
    if not isinstance(changes, Mapping) or not {"body", "title"} & set(changes):
        return True
    body = str(_field(payload, "issue", "body") or "")
    title = str(_field(payload, "issue", "title") or "")
    before_body = _field(changes, "body", "from") if "body" in changes else body
    before_title = _field(changes, "title", "from") if "title" in changes else title
    if not isinstance(before_body, str) or not isinstance(before_title, str):
        return True
    return _reading(body, title) != _reading(before_body, before_title)


def _reading(body: str, title: str) -> Reproducer | str:
    """What the bot reads from an issue: its reproducer, or why it has none."""
    try:
        return extract_reproducer(body, title)
    except UserError as problem:
        return str(problem)


def _commented(payload: Mapping[str, Any], config: Config,
               where: tuple[str, int, str]) -> Decision:
    comment = payload.get("comment")
    comment = comment if isinstance(comment, Mapping) else {}
    user = comment.get("user")
    user = user if isinstance(user, Mapping) else {}
    login = str(user.get("login", ""))
    if payload.get("action") != "created":
        return Decision(Kind.IGNORE, *where, message="only new comments are read")
    if user.get("type") == "Bot" or login.removesuffix("[bot]") == config.handle:
        return Decision(Kind.IGNORE, *where, message="comments of bots are not commands")
    repo, issue, _ = where
    comment_id = comment.get("id")
    comment_id = comment_id if isinstance(comment_id, int) else 0
    text = str(comment.get("body") or "")
    try:
        command = parse_comment(text, handle=config.handle)
    except UserError as error:
        return Decision(Kind.USAGE, repo, issue, login, check_permission=True,
                        message=str(error), comment_id=comment_id, comment=text)
    if command is None:
        return Decision(Kind.IGNORE, repo, issue, login, message="no command in the comment")
    kind = {Action.BISECT: Kind.BISECT, Action.HELP: Kind.HELP, Action.CANCEL: Kind.CANCEL}
    # help is harmless and answered for anyone; everything else needs the configured role
    needs_role = command.action is not Action.HELP
    return Decision(kind[command.action], repo, issue, login, command, needs_role,
                    comment_id=comment_id, comment=text)


def permitted(role: str, minimum: str) -> bool:
    """Whether `role` (admin, maintain, write, triage, read, none) is at least `minimum`."""
    rank = {name: position for position, name in enumerate(ROLES)}
    return rank.get(role, 0) >= rank[minimum]


def refusal(actor: str, config: Config, labeled: bool = False) -> str:
    """The polite reply to someone whose role may not start the bot (who commented a
    command, or added the trigger label: by the bisection issue form, which adds it)."""
    trigger = config.labels.trigger
    if labeled and actor.endswith("[bot]"):  # an app labelled it for someone it does not name
        return (
            f"The `{trigger}` label was added by `{actor}`, an app, whose role on this "
            f"repository cannot be checked, so no bisection was started. Someone with the "
            f"`{config.min_permission}` role (or a stronger one) can comment `/bisect`, or "
            "add the label themselves, to start one."
        )
    if labeled:
        return (
            f"Thanks for the report, @{actor}! The `{trigger}` label starts a bisection only "
            f"when someone with the `{config.min_permission}` role on this repository (or a "
            "stronger one) adds it, and here it came with the issue. A maintainer can comment "
            f"`/bisect` (or remove the label and add it again) to start one."
        )
    return (
        f"Thanks for the request, @{actor}! Only people with the `{config.min_permission}` "
        "role on this repository (or a stronger one) can start or cancel a bisection. A "
        f"maintainer can add the `{trigger}` label or repeat the command to start one."
    )


def help_reply(config: Config) -> str:
    return usage(config.handle)
