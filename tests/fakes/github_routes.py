"""The fake GitHub's behaviour, one function per documented operationId it implements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.fakes.github_json import Renderer
from tests.fakes.github_state import LEGACY_PERMISSION, GitHubState, Issue, Repo


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Call:
    """One request, already matched to its operation and checked against the spec."""

    world: GitHubState
    render: Renderer
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any

    @property
    def repo(self) -> Repo:
        repo = self.world.repos.get(f"{self.params['owner']}/{self.params['repo']}")
        if repo is None:
            raise NotFound()
        return repo

    def issue(self) -> Issue:
        issue = self.repo.issues.get(int(self.params["issue_number"]))
        if issue is None:
            raise NotFound()
        return issue

    def page(self, items: list[Any], default_per_page: int = 30) -> Reply:
        """Slice `items` per `page`/`per_page` and link the next and last pages, as GitHub does."""
        per_page = min(int(self.query.get("per_page", default_per_page)), 100)
        page = int(self.query.get("page", 1))
        last = max(1, -(-len(items) // per_page))
        links = []
        for rel, number in (("next", page + 1), ("last", last)):
            if page < last:
                query = {**self.query, "per_page": str(per_page), "page": str(number)}
                encoded = "&".join(f"{k}={v}" for k, v in query.items())
                links.append(f'<{self.render.api}{self.path}?{encoded}>; rel="{rel}"')
        headers = {"Link": ", ".join(links)} if links else {}
        return Reply(200, items[(page - 1) * per_page : page * per_page], headers)


class NotFound(Exception):
    pass


class Invalid(Exception):
    """GitHub's 422 "Validation Failed"."""


Route = Callable[[Call], Reply]
ROUTES: dict[str, Route] = {}


def route(operation_id: str) -> Callable[[Route], Route]:
    def register(function: Route) -> Route:
        ROUTES[operation_id] = function
        return function

    return register


@route("repos/get")
def get_repo(call: Call) -> Reply:
    repo = call.repo
    return Reply(200, {"id": repo.id, "name": repo.name, "full_name": repo.full_name,
                       "owner": call.render.user(call.world.users[repo.owner]),
                       "url": call.render.repo_url(repo), "private": False,
                       "default_branch": "main"})


@route("issues/get")
def get_issue(call: Call) -> Reply:
    return Reply(200, call.render.issue(call.repo, call.issue()))


@route("issues/update")
def update_issue(call: Call) -> Reply:
    issue = call.issue()
    for name in ("title", "body", "state"):
        if name in call.body:
            setattr(issue, name, call.body[name])
    issue.updated_at = call.world.tick()
    return Reply(200, call.render.issue(call.repo, issue))


@route("issues/list-for-repo")
def list_issues(call: Call) -> Reply:
    state = call.query.get("state", "open")
    wanted = {n for n in call.query.get("labels", "").split(",") if n}
    issues = [
        call.render.issue(call.repo, issue)
        for issue in sorted(call.repo.issues.values(), key=lambda i: -i.number)
        if state in ("all", issue.state) and wanted <= set(issue.labels)
    ]
    return call.page(issues)


@route("issues/create")
def create_issue(call: Call) -> Reply:
    labels = [x if isinstance(x, str) else x["name"] for x in call.body.get("labels", [])]
    issue = call.repo.add_issue(str(call.body["title"]), call.body.get("body"),
                                author=call.world.bot_login, labels=tuple(labels))
    return Reply(201, call.render.issue(call.repo, issue))


@route("issues/list-comments")
def list_comments(call: Call) -> Reply:
    issue = call.issue()
    return call.page([call.render.comment(call.repo, issue, c) for c in issue.comments])


@route("issues/create-comment")
def create_comment(call: Call) -> Reply:
    issue = call.issue()
    if issue.locked:  # what GitHub answers (a lock bot locks closed issues)
        return Reply(403, {"message": "Unable to create comment because issue is locked.",
                           "documentation_url": "https://docs.github.com/articles/locking-conversations/"})
    comment = call.repo.add_comment(issue.number, call.body["body"], author=call.world.bot_login)
    return Reply(201, call.render.comment(call.repo, issue, comment))


def _find_comment(call: Call) -> tuple[Issue, Any]:
    wanted = int(call.params["comment_id"])
    for issue in call.repo.issues.values():
        for comment in issue.comments:
            if comment.id == wanted:
                return issue, comment
    raise NotFound()


@route("issues/get-comment")
def get_comment(call: Call) -> Reply:
    return Reply(200, call.render.comment(call.repo, *_find_comment(call)))


@route("issues/update-comment")
def update_comment(call: Call) -> Reply:
    issue, comment = _find_comment(call)
    comment.body = call.body["body"]
    comment.updated_at = call.world.tick()
    return Reply(200, call.render.comment(call.repo, issue, comment))


@route("issues/list-labels-on-issue")
def list_issue_labels(call: Call) -> Reply:
    labels = [call.repo.labels[name] for name in call.issue().labels]
    return call.page([call.render.label(call.repo, label) for label in labels])


@route("issues/add-labels")
def add_labels(call: Call) -> Reply:
    issue = call.issue()
    for item in call.body.get("labels", []):
        name = item if isinstance(item, str) else item["name"]
        call.repo.add_label(name)  # GitHub creates a label that an issue is given
        if name not in issue.labels:
            issue.labels.append(name)
    return Reply(200, [call.render.label(call.repo, call.repo.labels[n]) for n in issue.labels])


@route("issues/remove-label")
def remove_label(call: Call) -> Reply:
    issue = call.issue()
    if call.params["name"] not in issue.labels:
        raise NotFound()
    issue.labels.remove(call.params["name"])
    return Reply(200, [call.render.label(call.repo, call.repo.labels[n]) for n in issue.labels])


@route("issues/list-labels-for-repo")
def list_repo_labels(call: Call) -> Reply:
    return call.page([call.render.label(call.repo, label) for label in call.repo.labels.values()])


@route("issues/create-label")
def create_label(call: Call) -> Reply:
    if call.body["name"] in call.repo.labels:
        raise Invalid()
    label = call.repo.add_label(call.body["name"], call.body.get("color", "ededed"),
                                call.body.get("description"))
    return Reply(201, call.render.label(call.repo, label))


@route("repos/get-collaborator-permission-level")
def get_permission(call: Call) -> Reply:
    user = call.world.users.get(call.params["username"])
    if user is None:
        raise NotFound()
    role = call.repo.roles.get(user.login, "none")
    collaborator = {**call.render.user(user), "role_name": role}
    return Reply(200, {"permission": LEGACY_PERMISSION[role], "role_name": role,
                       "user": collaborator})


@route("repos/get-commit")
def get_commit(call: Call) -> Reply:
    commit = call.repo.resolve_ref(call.params["ref"])
    if commit is None:
        raise Invalid()  # GitHub answers 422 "No commit found for SHA"
    return Reply(200, call.render.commit(call.repo, commit, with_files=True))


@route("repos/list-commits")
def list_commits(call: Call) -> Reply:
    head = call.repo.resolve_ref(call.query.get("sha", "main"))
    if head is None:
        raise NotFound()
    since = _parse_time(call.query.get("since"))
    commits = [c for c in call.repo.history(head) if since is None or c.date >= since]
    return call.page([call.render.commit(call.repo, c) for c in commits])


@route("repos/compare-commits-with-basehead")
def compare(call: Call) -> Reply:
    base_ref, _, head_ref = call.params["basehead"].partition("...")
    base, head = call.repo.resolve_ref(base_ref), call.repo.resolve_ref(head_ref)
    if base is None or head is None:
        raise NotFound()
    history = call.repo.history(head)
    if base not in history:
        raise NotFound()  # the fake keeps linear history; diverged bases are not modelled
    between = list(reversed(history[: history.index(base)]))  # oldest first, as GitHub lists
    body = call.render.comparison(call.repo, base, head, between)
    paged = call.page(body["commits"], default_per_page=250)
    return Reply(200, {**body, "commits": paged.body}, paged.headers)


@route("actions/cancel-workflow-run")
def cancel_run(call: Call) -> Reply:
    """202 for a run that is queued or in progress; GitHub's 409 for one that has ended."""
    runs = call.repo.runs
    run_id = int(call.params["run_id"])
    if run_id not in runs:
        raise NotFound()
    if runs[run_id] not in ("queued", "in_progress"):
        return Reply(409, {"message": "Cannot cancel a workflow run that is completed.",
                           "documentation_url": "https://docs.github.com/rest/actions/"
                                                "workflow-runs#cancel-a-workflow-run"})
    runs[run_id] = "cancelled"
    return Reply(202, {})


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
