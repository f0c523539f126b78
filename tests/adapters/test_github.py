"""The PyGithub adapter against the local fake GitHub, over real HTTP."""

from __future__ import annotations

import time

import pytest
import requests
from github import GithubException
from github.GithubException import RateLimitExceededExceedsMaxWait

from bot.adapters.github import GitHubClient, make_retry
from bot.adapters.github_data import CommentData, changed_lines
from tests.fakes.github_server import FakeGitHub
from tests.fakes.github_state import Repo
from tests.fakes.openapi_spec import OpenApiSpec

TEST_REPO = "pytorch/pytorch"  # the repository the github_server fixture creates


@pytest.fixture
def client(github_server: FakeGitHub) -> GitHubClient:
    retry = make_retry(total=3, max_wait=2.0, secondary_rate_wait=1.0, backoff_factor=0.1)
    return GitHubClient(TEST_REPO, "test-token", base_url=github_server.url, retry=retry,
                        seconds_between_requests=0, seconds_between_writes=0)


def test_reads_issue_and_comments(client: GitHubClient, github_repo: Repo,
                                  github_server: FakeGitHub) -> None:
    issue = github_repo.add_issue("compile regression", "```py\nprint(1)\n```", author="alice",
                                  labels=("bisect", "module: inductor"))
    github_repo.add_comment(issue.number, "@torch-bisect-bot bisect", author="bob")
    github_repo.add_comment(issue.number, "queued", author="torch-bisect-bot[bot]")

    data = client.get_issue(issue.number)
    comments = client.list_comments(issue.number)

    assert (data.title, data.author, data.labels) == (
        "compile regression", "alice", ("bisect", "module: inductor"))
    assert data.body.startswith("```py")
    assert data.html_url == f"https://github.com/{TEST_REPO}/issues/{issue.number}"
    assert [(c.author, c.author_type, c.body) for c in comments] == [
        ("bob", "User", "@torch-bisect-bot bisect"),
        ("torch-bisect-bot[bot]", "Bot", "queued"),
    ]
    assert github_server.rejected == []


def test_lists_every_page_of_comments(client: GitHubClient, github_repo: Repo) -> None:
    issue = github_repo.add_issue("busy issue")
    for index in range(130):  # more than one page of 100
        github_repo.add_comment(issue.number, f"comment {index}")
    bodies = [c.body for c in client.list_comments(issue.number)]
    assert bodies == [f"comment {index}" for index in range(130)]


def test_creates_then_edits_comment(client: GitHubClient, github_repo: Repo,
                                    github_server: FakeGitHub) -> None:
    issue = github_repo.add_issue("x")
    created = client.create_comment(issue.number, "<!-- torch-bisect-bot -->\nqueued")
    client.edit_comment(created.id, "<!-- torch-bisect-bot -->\ndone")

    assert isinstance(created, CommentData)
    assert created.author == github_server.state.bot_login
    assert created.html_url.endswith(f"#issuecomment-{created.id}")
    assert [(c.id, c.body) for c in github_repo.issues[issue.number].comments] == [
        (created.id, "<!-- torch-bisect-bot -->\ndone")]
    assert github_server.rejected == []


def test_adds_and_removes_labels(client: GitHubClient, github_repo: Repo,
                                 github_server: FakeGitHub) -> None:
    issue = github_repo.add_issue("x", labels=("bisect",))
    client.add_labels(issue.number, ["bisect/running", "bisect: found"])
    client.remove_label(issue.number, "bisect")
    client.remove_label(issue.number, "bisect/running")  # a `/` must stay inside its segment
    client.remove_label(issue.number, "never-there")  # 404, ignored

    assert github_repo.issues[issue.number].labels == ["bisect: found"]
    assert github_server.rejected == []


def test_ensure_labels_creates_only_missing(client: GitHubClient, github_repo: Repo,
                                            github_server: FakeGitHub) -> None:
    github_repo.add_label("bisect", color="000000")
    created = client.ensure_labels({"Bisect": "ff0000", "bisect: found": "#00ff00"})

    assert created == ["bisect: found"]
    assert {n: lab.color for n, lab in github_repo.labels.items()} == {
        "bisect": "000000", "bisect: found": "00ff00"}
    assert github_server.rejected == []


@pytest.mark.parametrize("role", ["admin", "maintain", "write", "triage", "read"])
def test_permission_reads_role_name_not_legacy_field(client: GitHubClient, github_repo: Repo,
                                                     role: str) -> None:
    github_repo.set_role("someone", role)
    assert client.get_permission("someone") == role


def test_permission_of_non_collaborator_and_unknown_user(client: GitHubClient,
                                                         github_server: FakeGitHub) -> None:
    github_server.state.user("passerby")
    assert client.get_permission("passerby") == "none"
    assert client.get_permission("no-such-user") == "none"
    assert github_server.rejected == []


def test_creates_and_finds_issue_by_marker(client: GitHubClient, github_repo: Repo,
                                           github_server: FakeGitHub) -> None:
    github_repo.add_issue("unrelated", "<!-- other -->", labels=("regression",))
    created = client.create_issue("sweep: case_a fails", "body\n<!-- case_a -->",
                                  labels=["regression"])
    found = client.find_issues_with_marker("<!-- case_a -->", labels=["regression"])

    assert [issue.number for issue in found] == [created.number]
    assert github_repo.issues[created.number].author == github_server.state.bot_login
    assert github_repo.issues[created.number].labels == ["regression"]
    assert github_server.rejected == []


def _history(repo: Repo) -> list[str]:
    shas = [repo.add_commit("base", ("README.md",)).sha]
    shas.append(repo.add_commit("[inductor] fuse more", ("torch/_inductor/scheduler.py",)).sha)
    shas.append(repo.add_commit("[dynamo] guard tweak", ("torch/_dynamo/guards.py",
                                                          "test/dynamo/test_guards.py")).sha)
    return shas


def test_compare_lists_commits_with_files(client: GitHubClient, github_repo: Repo,
                                          github_server: FakeGitHub) -> None:
    base, first, second = _history(github_repo)
    commits = client.compare(base, second)

    assert [(c.sha, c.message) for c in commits] == [
        (first, "[inductor] fuse more"), (second, "[dynamo] guard tweak")]
    assert commits[1].files == ("torch/_dynamo/guards.py", "test/dynamo/test_guards.py")
    assert commits[0].html_url == f"https://github.com/{TEST_REPO}/commit/{first}"
    assert client.get_commit(first[:10]).files == ("torch/_inductor/scheduler.py",)
    assert github_server.rejected == []


def test_a_commit_keeps_the_lines_its_patches_change(client: GitHubClient, github_repo: Repo,
                                                     github_server: FakeGitHub) -> None:
    """GitHub's `files[].patch` is each file's unified diff, absent for a large file: of it a
    commit keeps the added and removed lines, not the context or the hunk headers."""
    github_repo.add_commit("base", ("README.md",))
    patch = ("@@ -10,3 +10,3 @@ Tensor cumsum(const Tensor& self, int64_t dim) {\n"
             "   auto result = at::empty_like(self);\n"
             "-  cumsum_out(self, dim, result);\n"
             "+  at::native::cumsum_out(self, dim, result);\n"
             "   return result;")
    sha = github_repo.add_commit(
        "Fix an overflow in scans", ("aten/src/ATen/native/ReduceOps.cpp", "big.bin"),
        patches={"aten/src/ATen/native/ReduceOps.cpp": patch}).sha

    data = client.get_commit(sha)
    assert data.files == ("aten/src/ATen/native/ReduceOps.cpp", "big.bin")
    assert data.changed_lines == ("  cumsum_out(self, dim, result);\n"
                                  "  at::native::cumsum_out(self, dim, result);")
    assert client.get_commit(sha, with_files=False).changed_lines == ""
    assert github_server.rejected == []


def test_the_changed_lines_kept_of_a_commit_are_bounded() -> None:
    huge = "@@ -1 +1 @@\n" + "+x = 1\n" * 100_000
    kept = changed_lines([huge, "@@ -1 +1 @@\n+cumsum(x)"], limit=1_000)
    assert len(kept) <= 1_000 and "cumsum" not in kept
    assert changed_lines([None, "@@ -1 +1 @@\n-a\n+b\n c"]) == "a\nb"


def test_lists_branch_commits_newest_first(client: GitHubClient, github_repo: Repo) -> None:
    for day in (20, 21, 22):
        github_repo.add_commit(f"2026-05-{day} nightly release (abc{day})", branch="nightly")
    commits = client.list_branch_commits("nightly", limit=2)
    assert [c.message for c in commits] == [
        "2026-05-22 nightly release (abc22)", "2026-05-21 nightly release (abc21)"]


def test_for_repo_reaches_another_repository(client: GitHubClient, github_repo: Repo,
                                             github_server: FakeGitHub) -> None:
    other = github_server.state.add_repo("pytorch/test-infra")
    other.add_issue("sweep tracking")
    client.for_repo("pytorch/test-infra").add_labels(1, ["regression"])
    assert other.issues[1].labels == ["regression"]
    assert github_repo.issues == {}


def test_retries_a_502(client: GitHubClient, github_repo: Repo,
                       github_server: FakeGitHub) -> None:
    issue = github_repo.add_issue("x")
    comment = client.create_comment(issue.number, "hello")
    github_server.inject(502, {"message": "Server Error"}, method="PATCH")
    client.edit_comment(comment.id, "hello again")

    assert [c.body for c in github_repo.issues[issue.number].comments] == ["hello again"]
    assert len(github_server.served_faults) == 1 and not github_server.faults
    assert github_server.rejected == []


def test_gives_up_after_bounded_retries(client: GitHubClient, github_repo: Repo,
                                        github_server: FakeGitHub) -> None:
    issue = github_repo.add_issue("x")
    for _ in range(5):
        github_server.inject(502, {"message": "Server Error"})
    with pytest.raises(GithubException) as raised:
        client.get_issue(issue.number)
    assert raised.value.status == 502
    assert len(github_server.faults) == 1  # 1 try + 3 retries used four of the five


def test_waits_out_secondary_rate_limit(client: GitHubClient, github_repo: Repo,
                                        github_server: FakeGitHub) -> None:
    issue = github_repo.add_issue("x")
    github_server.inject_secondary_rate_limit(retry_after=1, method="POST")
    started = time.monotonic()
    client.create_comment(issue.number, "after the wait")

    assert time.monotonic() - started >= 0.9
    assert [c.body for c in github_repo.issues[issue.number].comments] == ["after the wait"]
    assert len(github_server.served_faults) == 1 and not github_server.faults


def test_refuses_a_retry_after_longer_than_the_bound(client: GitHubClient, github_repo: Repo,
                                                     github_server: FakeGitHub) -> None:
    issue = github_repo.add_issue("x")
    github_server.inject_secondary_rate_limit(retry_after=3600)
    started = time.monotonic()
    with pytest.raises(RateLimitExceededExceedsMaxWait):
        client.create_comment(issue.number, "never posted")
    assert time.monotonic() - started < 5
    assert github_repo.issues[issue.number].comments == []


def test_fake_rejects_undocumented_requests(github_server: FakeGitHub) -> None:
    headers = {"Authorization": "Bearer test-token"}
    made_up = requests.get(f"{github_server.url}/repos/{TEST_REPO}/frobnicate", headers=headers,
                           timeout=5)
    bad_body = requests.post(f"{github_server.url}/repos/{TEST_REPO}/issues/1/labels",
                             json=["bare", "array"], headers=headers, timeout=5)
    bad_query = requests.get(f"{github_server.url}/repos/{TEST_REPO}/issues?state=bogus",
                             headers=headers, timeout=5)

    assert (made_up.status_code, bad_body.status_code, bad_query.status_code) == (404, 422, 422)
    assert [(r.method, r.status) for r in github_server.rejected] == [
        ("GET", 404), ("POST", 422), ("GET", 422)]
    assert "no documented operation" in github_server.rejected[0].problems[0]
    github_server.rejected.clear()  # this test made them on purpose


def test_fake_accepts_null_where_the_spec_says_nullable(github_server: FakeGitHub) -> None:
    response = requests.post(f"{github_server.url}/repos/{TEST_REPO}/issues",
                             json={"title": "t", "body": "b", "milestone": None},
                             headers={"Authorization": "Bearer test-token"}, timeout=5)
    assert response.status_code == 201
    assert github_server.rejected == []


def test_works_below_an_enterprise_api_prefix(github_openapi: OpenApiSpec) -> None:
    with FakeGitHub(github_openapi, prefix="/api/v3") as server:
        repo = server.state.add_repo("corp/tools")
        repo.add_issue("x")
        client = GitHubClient("corp/tools", None, base_url=server.url,
                              seconds_between_requests=0, seconds_between_writes=0)
        client.create_comment(1, "hello")
    assert server.url.endswith("/api/v3")
    assert [c.body for c in repo.issues[1].comments] == ["hello"]
    assert server.rejected == []


def test_fake_requires_the_token(github_server: FakeGitHub) -> None:
    client = GitHubClient(TEST_REPO, "wrong", base_url=github_server.url,
                          retry=make_retry(total=0), seconds_between_requests=0)
    with pytest.raises(GithubException) as raised:
        client.get_permission("anyone")
    assert raised.value.status == 401


def test_edit_issue_changes_the_body_and_state(client: GitHubClient, github_server: FakeGitHub):
    repo = github_server.state.repos[TEST_REPO]
    number = client.create_issue("regression in cumsum", "first body", ["bisect"]).number
    client.edit_issue(number, body="second body", state="closed")
    assert (repo.issues[number].body, repo.issues[number].state) == ("second body", "closed")
    assert github_server.rejected == []


def test_a_new_comment_is_not_posted_twice_after_a_bad_gateway(
        client: GitHubClient, github_server: FakeGitHub) -> None:
    repo = github_server.state.repos[TEST_REPO]
    number = client.create_issue("t", "b", []).number
    github_server.inject(502, method="POST")
    with pytest.raises(GithubException):
        client.create_comment(number, "only once")
    assert [c.body for c in repo.issues[number].comments] == []
    client.edit_issue(number, body="patched")  # a PATCH after a 502 is retried: no harm twice
    assert repo.issues[number].body == "patched"
