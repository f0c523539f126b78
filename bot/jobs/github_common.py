"""What the GitHub jobs share: client from the environment, config, sticky comment, labels."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from github import GithubException

from bot.adapters.github import DEFAULT_BASE_URL, GitHubClient
from bot.adapters.github_data import CommentData
from bot.core.config import CONFIG_PATH, Config, parse_config
from bot.core.errors import UserError, parse_or_malformed
from bot.core.job_plan import JobPlan
from bot.core.labels import State, label_colors, transition
from bot.core.report import MARKER, owner_run


def client_from_env(repo: str, environ: Mapping[str, str]) -> GitHubClient:
    """A client for `repo` with the job's token (GITHUB_TOKEN) and API base (GITHUB_API_URL)."""
    token = environ.get("GITHUB_TOKEN")
    if not token:
        raise UserError("GITHUB_TOKEN is not set; this job needs issues: write")
    return GitHubClient(repo, token, base_url=environ.get("GITHUB_API_URL") or DEFAULT_BASE_URL)


def load_config(path: Path | None) -> Config:
    """The repository's config file; all defaults when the default path does not exist."""
    chosen = path or Path(CONFIG_PATH)
    if not chosen.is_file():
        if path is not None:
            raise UserError(f"config file {path} does not exist")
        return Config()
    notes: list[str] = []
    config = parse_config(chosen.read_text(encoding="utf-8"), where=str(chosen), notes=notes)
    for note in notes:
        log(note)
    return config


def find_sticky(comments: list[CommentData]) -> CommentData | None:
    """The bot's own report comment: it carries the marker and a bot wrote it.

    Checking the author too means a user who pastes the marker cannot make the bot look
    for its state in their comment.
    """
    for comment in comments:
        if MARKER in comment.body and comment.author_type == "Bot":
            return comment
    return None


def upsert_sticky(client: GitHubClient, issue: int, body: str) -> int:
    """Edit the sticky comment if there is one, else create it; return its id.

    A creation GitHub answers with a 5xx is not retried by the client (a POST may have been
    made all the same): here the comments are listed again, and the comment is made once more
    only where it is not there."""
    existing = find_sticky(client.list_comments(issue))
    if existing is not None:
        client.edit_comment(existing.id, body)
        return existing.id
    try:
        return client.create_comment(issue, body).id
    except GithubException as error:
        if not 500 <= (error.status or 0) < 600:
            raise
        log(f"GitHub answered {error.status} to the comment; looking whether it was made")
    made = find_sticky(client.list_comments(issue))
    if made is not None:
        client.edit_comment(made.id, body)
        return made.id
    return client.create_comment(issue, body).id


def set_state(client: GitHubClient, issue: int, state: State | None, config: Config) -> None:
    """Move the issue's state label to `state` (None: remove every state label)."""
    change = transition(client.get_issue(issue).labels, state, config.labels)
    if change.add:
        client.ensure_labels(label_colors(config.labels))
        client.add_labels(issue, change.add)
    for name in change.remove:
        client.remove_label(issue, name)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Atomically: write beside, then rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)


def read_outcome(path: Path) -> dict[str, Any] | None:
    """outcome.json, None when the run job left none, or an error where it is damaged (a
    half-uploaded artifact) or cannot be read: either way the report says the bisection
    failed, and a run the index stopped (`write_stopped`) says nothing was tested."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as damaged:  # UnicodeDecodeError is a ValueError
        return {"error": f"The run job's outcome.json could not be read ({damaged}); see the "
                         "workflow run's log."}
    return data if isinstance(data, dict) else None


def log(message: str) -> None:
    print(f"bisect-bot: {message}", file=sys.stderr, flush=True)


def load_plan(path: Path) -> JobPlan:
    """plan.json, the contract the plan job hands to the run, started and report jobs; a
    missing or damaged file is a UserError (one line, exit 2), not a traceback."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read the plan ({exc.strerror or exc})") from None
    return JobPlan.from_dict(parse_or_malformed(f"{path} (plan.json)", json.loads, text))


def owned_sticky(client: GitHubClient, plan: JobPlan) -> tuple[CommentData | None, bool]:
    """The plan's sticky comment, and whether this run still owns it (no newer trigger or
    cancel took it over); a comment someone deleted counts as owned."""
    current = {c.id: c for c in client.list_comments(plan.issue)}.get(plan.comment_id)
    return current, current is None or owner_run(current.body) == plan.run_id
