"""What the bot writes counts one thing as one: "(1 commit)", not "(1 commits)"."""

from __future__ import annotations

import pytest

from bot.adapters.history import IssueCase, Notice
from bot.jobs.sweep_text import issue_body, issue_text, notices_comment

FIRST_BAD, LAST_GOOD = "2.13.0.dev20260505+cpu", "2.13.0.dev20260504+cpu"


def detail(**more: object) -> dict[str, object]:
    return {"first_bad": FIRST_BAD, "last_good": LAST_GOOD, "path": "suite/a.py",
            "signature": "RuntimeError: broke", **more}


def test_a_window_of_one_commit_on_main_is_one_commit() -> None:
    found = {"good_main": "a" * 40, "compare_url": "https://github.com/pytorch/pytorch/compare/x",
             "commit_count": 1}
    body = issue_body("suite/a", detail(commit_range=found), FIRST_BAD)
    assert "(1 commit)" in body and "(1 commits)" not in body


def test_one_build_or_case_left_out_of_a_table_is_one() -> None:
    probes = [{"version": f"2.13.0.dev2026{n:04d}+cpu", "verdict": "good", "reason": "exit 0"}
              for n in range(61)]
    body = issue_body("suite/a", detail(probes=probes), FIRST_BAD)
    assert "| … 1 more build |" in body
    cases = [IssueCase(f"suite/c{n}", detail(path=f"suite/c{n}.py")) for n in range(61)]
    assert "| … 1 more case |" in issue_text(cases)[1]


@pytest.mark.parametrize(("kind", "said"), [
    ("fixed", "The scheduled sweep says 1 case appears fixed:"),
    ("removed", "- … 1 more was removed"),
    ("again", "- … 1 more is back"),
])
def test_one_of_the_notices_of_a_comment_is_one(kind: str, said: str) -> None:
    notices = [Notice(f"suite/c{n}", kind, FIRST_BAD) for n in range(1 if kind == "fixed"
                                                                      else 61)]
    comment = notices_comment([*notices, Notice("suite/j", "joined", FIRST_BAD)])
    assert said in comment


def test_a_bisection_report_s_window_of_one_commit_is_one_commit() -> None:
    """The same slip in `bisect`'s report (and the triage's): "compare: ... (1 commits)"."""
    from bot.core.suspects import Commit, CommitRange, render_range_markdown
    found = CommitRange("2026-05-04", "2026-05-05", "a" * 40, "b" * 40,
                        commits=(Commit("b" * 40, "a change"),))
    section = render_range_markdown(found)
    assert "(1 commit)" in section and "(1 commits)" not in section
