"""Hypothesis fuzzing of every parser of outside input: only UserError ever escapes, and it says what to fix."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.core.bisection import Bisection
from bot.core.builds import parse_simple_html, parse_simple_json
from bot.core.config import Config
from bot.core.errors import UserError
from bot.core.job_plan import JobPlan
from bot.core.results import BisectResult
from bot.core.suite import parse_meta
from bot.core.triggers import Kind, decide
from bot.core.verdicts import Verdict

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=5),
    max_leaves=20,
)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mutations(good: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A valid document with one key dropped, or one value (at any depth) replaced by junk."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(
            node, list) else ()
        for key, child in items:
            walk(child, (*path, key))

    walk(good, ())

    def mutate(path: tuple[Any, ...], junk: Any, drop: bool) -> Any:
        document = json.loads(json.dumps(good))
        if not path:
            return junk
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if drop and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = junk
        return document

    return st.builds(mutate, st.sampled_from(paths), JSON, st.booleans())


def _says_what(error: UserError) -> None:
    assert str(error).strip() and "\n" not in str(error).strip()


PAYLOAD = st.fixed_dictionaries({}, optional={
    "action": st.sampled_from(["labeled", "created", "edited"]) | JSON,
    "issue": st.fixed_dictionaries({}, optional={"number": JSON, "pull_request": JSON}) | JSON,
    "label": st.fixed_dictionaries({}, optional={"name": st.just("bisect") | JSON}) | JSON,
    "comment": st.fixed_dictionaries({}, optional={
        "body": st.just("@torch-bisect-bot bisect repeat=2") | JSON,
        "user": st.fixed_dictionaries({}, optional={"login": JSON, "type": JSON}) | JSON}) | JSON,
    "repository": st.fixed_dictionaries({}, optional={"full_name": JSON}) | JSON,
    "sender": st.fixed_dictionaries({}, optional={"login": JSON}) | JSON,
})


@FUZZ
@given(st.sampled_from(["issues", "issue_comment", "push"]), PAYLOAD)
def test_event_payloads_never_crash_the_decision(event_name, payload):
    decision = decide(event_name, payload, Config())
    assert isinstance(decision.kind, Kind)


@FUZZ
@given(st.lists(st.text(max_size=40) | st.sampled_from(
    ['timeout = 5', 'repeat = "x"', 'match = "("', 'metric = 3', 'threshold = 0.1',
     'issue = "nope"', 'tags = [1]', 'requires = "gpu"', 'expect = "pass"', '[x]', '= 1']),
    max_size=6))
def test_suite_metadata_errors_are_user_errors(lines):
    text = "# /// bisect-case\n" + "".join(f"# {line}\n" for line in lines) + "# ///\n"
    try:
        parse_meta(text, "case.py")
    except UserError as error:
        _says_what(error)
        assert "case.py" in str(error)


@FUZZ
@given(st.text(max_size=300) | JSON.map(json.dumps))
def test_index_pages_never_raise_anything_but_user_error(text):
    parse_simple_html(text, "https://download.pytorch.org/whl/nightly/cpu/torch/")
    try:
        parse_simple_json(text, "https://download.pytorch.org/whl/nightly/cpu/torch/")
    except UserError as error:
        _says_what(error)


def _plan() -> dict[str, Any]:
    from bot.core.commands import Action, Command
    from bot.core.issue_text import extract_reproducer
    from bot.core.job_plan import settings as plan_settings

    reproducer = extract_reproducer("```python\nimport torch\nprint(torch.ones(2))\n```")
    plan = JobPlan("o/r", 7, 11, "run-1", "someone", reproducer,
                   plan_settings(Command(Action.BISECT), Config()))
    return plan.to_dict()


@FUZZ
@given(_mutations(_plan()))
def test_plan_json_errors_are_user_errors(document):
    try:
        JobPlan.from_dict(document)
    except UserError as error:
        _says_what(error)
        assert "plan" in str(error)


def _result() -> dict[str, Any]:
    from bot.core.builds import Build, WheelLink

    builds = tuple(Build(f"2.13.0.dev2026052{i}+cpu", None, "cpu",
                         WheelLink(f"torch-{i}.whl", f"https://x/{i}.whl", None, False))
                   for i in range(3))
    state = Bisection(3).record(2, Verdict.BAD).record(0, Verdict.GOOD)
    return BisectResult(builds, state, ()).to_dict()


@FUZZ
@given(_mutations(_result()))
def test_outcome_json_errors_are_user_errors(document):
    try:
        BisectResult.from_dict(document)
    except UserError as error:
        _says_what(error)


@FUZZ
@given(st.text(max_size=80) | JSON.map(json.dumps) | _mutations(
    json.loads(Bisection(4).record(3, Verdict.BAD).to_json())).map(json.dumps))
def test_bisection_json_errors_are_value_errors(text):
    try:
        Bisection.from_json(text)
    except ValueError as error:  # documented: from_json raises ValueError (a UserError too)
        assert isinstance(error, UserError)
        _says_what(error)


def test_a_good_plan_and_result_round_trip():
    assert JobPlan.from_dict(_plan()).to_dict() == _plan()
    assert BisectResult.from_dict(_result()).to_dict() == _result()


@pytest.mark.parametrize("document", [{}, {"format": 1}, [], "plan"])
def test_hand_picked_plans(document):
    with pytest.raises(UserError):
        JobPlan.from_dict(document)
