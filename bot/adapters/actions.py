"""The GitHub Actions runtime files: the event payload, step outputs and the job summary."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.core.errors import UserError


class ActionsEnvironmentError(UserError):
    """A variable the Actions runner sets is missing: we are not running inside a workflow.
    A usage error (one line, exit 2), as for someone trying a job's command by hand."""


@dataclass(frozen=True)
class Event:
    """What triggered the workflow: `issues`, `issue_comment`, `schedule`, ... and its payload."""

    name: str
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def action(self) -> str | None:
        """`labeled`, `created`, ...; None for events without actions, such as `schedule`."""
        action = self.payload.get("action")
        return action if isinstance(action, str) else None


def _require(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name)
    if not value:
        raise ActionsEnvironmentError(f"{name} is not set; is this running in GitHub Actions?")
    return value


def read_event(environ: Mapping[str, str]) -> Event:
    """The event from GITHUB_EVENT_NAME and the JSON file GITHUB_EVENT_PATH names."""
    name = _require(environ, "GITHUB_EVENT_NAME")
    return Event(name, read_payload(Path(_require(environ, "GITHUB_EVENT_PATH"))))


def event_path(given: Path | None, environ: Mapping[str, str]) -> Path:
    """The event payload's file: the one given, else GITHUB_EVENT_PATH's (Actions sets it)."""
    if given is not None:
        return given
    if not environ.get("GITHUB_EVENT_PATH"):
        raise ActionsEnvironmentError("GITHUB_EVENT_PATH is not set, as outside a GitHub "
                                      "Actions workflow: give the webhook payload with --event "
                                      "FILE")
    return Path(environ["GITHUB_EVENT_PATH"])


def read_payload(path: Path) -> dict[str, Any]:
    """An event payload: a JSON object; one that cannot be read is a UserError."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot read the event payload ({exc.strerror or exc})") \
            from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: the event payload is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise UserError(f"{path}: the event payload is a JSON {type(payload).__name__}, not "
                        "an object")
    return payload


def format_output(name: str, value: str, make_delimiter: Callable[[], str] | None = None) -> str:
    """One GITHUB_OUTPUT entry in the multiline form `name<<DELIMITER`, value, `DELIMITER`.

    The delimiter is random, as in actions/toolkit's `prepareKeyValueMessage`, and must not
    occur in the name or value, so that a value cannot end early and forge other outputs.
    """
    if not name or "\n" in name or "\r" in name:
        raise ValueError(f"invalid output name {name!r}")
    delimiter = (make_delimiter or (lambda: f"ghadelimiter_{uuid.uuid4()}"))()
    if delimiter in name or delimiter in value:
        raise ValueError(f"output delimiter {delimiter!r} occurs in output {name!r}")
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def write_outputs(environ: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Append step outputs to the GITHUB_OUTPUT file."""
    text = "".join(format_output(name, value) for name, value in outputs.items())
    with Path(_require(environ, "GITHUB_OUTPUT")).open("a", encoding="utf-8") as file:
        file.write(text)


def append_summary(environ: Mapping[str, str], markdown: str) -> None:
    """Append Markdown to the job summary (GITHUB_STEP_SUMMARY), ending it with a newline."""
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    with Path(_require(environ, "GITHUB_STEP_SUMMARY")).open("a", encoding="utf-8") as file:
        file.write(text)
