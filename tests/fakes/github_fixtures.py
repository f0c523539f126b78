"""Pytest fixtures for the fake GitHub; register with `pytest_plugins = [this module]`."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.fakes.github_server import FakeGitHub
from tests.fakes.github_state import Repo
from tests.fakes.openapi_spec import OpenApiSpec

FETCH_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fetch_test_data.py"
TEST_REPO = "pytorch/pytorch"


def _fetch_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_test_data", FETCH_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def github_openapi() -> OpenApiSpec:
    """GitHub's REST description, fetched with `npm pack` on first use, parsed once a session."""
    fetcher = _fetch_script()
    return OpenApiSpec.load(fetcher.fetch(fetcher.OPENAPI))


@pytest.fixture
def github_server(github_openapi: OpenApiSpec) -> Iterator[FakeGitHub]:
    """A running fake GitHub with one repository; fails the test if a request broke the spec."""
    with FakeGitHub(github_openapi, token="test-token") as server:
        server.state.add_repo(TEST_REPO)
        # the sender of tests.jobs.github_helpers.labeled_event: labels are checked too
        server.state.repos[TEST_REPO].set_role("triager", "triage")
        yield server
    assert server.response_problems == [], "the fake answered outside GitHub's description"


@pytest.fixture
def github_repo(github_server: FakeGitHub) -> Repo:
    """The fake's `pytorch/pytorch`, to seed and to inspect."""
    return github_server.state.repos[TEST_REPO]
