"""The GitHub Actions runtime files: the event payload, step outputs and the job summary."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ActionsEnvironmentError(RuntimeError):
    """A variable the Actions runner sets is missing: we are not running inside a workflow."""


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
    payload = json.loads(Path(_require(environ, "GITHUB_EVENT_PATH")).read_text(encoding="utf-8"))
    if not isinstance(payload, dict):
        raise ValueError(f"event payload is a {type(payload).__name__}, not a JSON object")
    return Event(name, payload)


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
