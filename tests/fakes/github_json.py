"""Renders the fake GitHub's state as the JSON objects GitHub's REST API documents."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tests.fakes.github_state import Comment, Commit, Issue, Label, Repo, User


def stamp(when: datetime | None) -> str | None:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else None


@dataclass(frozen=True)
class Renderer:
    """Builds response bodies; `api` is the server's base URL, `html` the web base URL."""

    api: str
    html: str = "https://github.com"

    def user(self, user: User) -> dict[str, Any]:
        url = f"{self.api}/users/{user.login}"
        return {
            "login": user.login, "id": user.id, "node_id": f"U_{user.id}", "type": user.type,
            "site_admin": False, "url": url, "html_url": f"{self.html}/{user.login}",
            "avatar_url": f"{self.html}/{user.login}.png", "gravatar_id": "",
            "followers_url": f"{url}/followers",
            "following_url": f"{url}/following{{/other_user}}",
            "gists_url": f"{url}/gists{{/gist_id}}",
            "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{url}/subscriptions", "organizations_url": f"{url}/orgs",
            "repos_url": f"{url}/repos", "events_url": f"{url}/events{{/privacy}}",
            "received_events_url": f"{url}/received_events",
        }

    def repo_url(self, repo: Repo) -> str:
        return f"{self.api}/repos/{repo.full_name}"

    def label(self, repo: Repo, label: Label) -> dict[str, Any]:
        return {
            "id": label.id, "node_id": f"LA_{label.id}", "name": label.name,
            "url": f"{self.repo_url(repo)}/labels/{label.name}", "color": label.color,
            "description": label.description, "default": False,
        }

    def issue(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        url = f"{self.repo_url(repo)}/issues/{issue.number}"
        return {
            "id": issue.id, "node_id": f"I_{issue.id}", "number": issue.number, "url": url,
            "repository_url": self.repo_url(repo), "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments", "events_url": f"{url}/events",
            "html_url": f"{self.html}/{repo.full_name}/issues/{issue.number}",
            "title": issue.title, "body": issue.body, "state": issue.state, "locked": False,
            "user": self.user(repo.world.users[issue.author]),
            "labels": [self.label(repo, repo.labels[name]) for name in issue.labels],
            "assignee": None, "assignees": [], "milestone": None, "comments": len(issue.comments),
            "created_at": stamp(issue.created_at), "updated_at": stamp(issue.updated_at),
            "closed_at": None, "author_association": "NONE",
        }

    def comment(self, repo: Repo, issue: Issue, comment: Comment) -> dict[str, Any]:
        return {
            "id": comment.id, "node_id": f"IC_{comment.id}", "body": comment.body,
            "url": f"{self.repo_url(repo)}/issues/comments/{comment.id}",
            "html_url": f"{self.html}/{repo.full_name}/issues/{issue.number}"
            f"#issuecomment-{comment.id}",
            "issue_url": f"{self.repo_url(repo)}/issues/{issue.number}",
            "user": self.user(repo.world.users[comment.author]),
            "created_at": stamp(comment.created_at), "updated_at": stamp(comment.updated_at),
            "author_association": "NONE",
        }

    def commit(self, repo: Repo, commit: Commit, with_files: bool = False) -> dict[str, Any]:
        url = f"{self.repo_url(repo)}/commits/{commit.sha}"
        person = {"name": commit.author, "email": f"{commit.author}@example.com",
                  "date": stamp(commit.date)}
        author = self.user(repo.world.users[commit.author])
        body: dict[str, Any] = {
            "sha": commit.sha, "node_id": f"C_{commit.sha}", "url": url,
            "html_url": f"{self.html}/{repo.full_name}/commit/{commit.sha}",
            "comments_url": f"{url}/comments", "author": author, "committer": author,
            "parents": [{"sha": p, "url": f"{self.repo_url(repo)}/commits/{p}"}
                        for p in commit.parents],
            "commit": {
                "url": f"{self.repo_url(repo)}/git/commits/{commit.sha}",
                "author": person, "committer": person, "message": commit.message,
                "comment_count": 0,
                "tree": {"sha": commit.sha[::-1], "url": f"{self.repo_url(repo)}/git/trees/x"},
            },
        }
        if with_files:
            body["files"] = [self.diff_entry(repo, commit, name) for name in commit.files]
        return body

    def diff_entry(self, repo: Repo, commit: Commit, filename: str) -> dict[str, Any]:
        blob = f"{self.html}/{repo.full_name}/blob/{commit.sha}/{filename}"
        return {
            "sha": commit.sha, "filename": filename, "status": "modified", "additions": 1,
            "deletions": 1, "changes": 2, "blob_url": blob, "raw_url": blob.replace("blob", "raw"),
            "contents_url": f"{self.repo_url(repo)}/contents/{filename}?ref={commit.sha}",
        } | ({"patch": commit.patches[filename]} if filename in commit.patches else {})

    def comparison(self, repo: Repo, base: Commit, head: Commit,
                   commits: list[Commit]) -> dict[str, Any]:
        basehead = f"{base.sha}...{head.sha}"
        web = f"{self.html}/{repo.full_name}/compare/{basehead}"
        files = {name: self.diff_entry(repo, c, name) for c in commits for name in c.files}
        return {
            "url": f"{self.repo_url(repo)}/compare/{basehead}", "html_url": web,
            "permalink_url": web, "diff_url": f"{web}.diff", "patch_url": f"{web}.patch",
            "base_commit": self.commit(repo, base), "merge_base_commit": self.commit(repo, base),
            "status": "ahead" if commits else "identical", "ahead_by": len(commits),
            "behind_by": 0, "total_commits": len(commits),
            "commits": [self.commit(repo, c) for c in commits], "files": list(files.values()),
        }
