"""Shared fixtures: a local nightly mirror served on 127.0.0.1 and a shared environment cache."""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.mirror import IndexServer, Mirror, build_mirror

pytest_plugins = ["tests.fakes.github_fixtures"]

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
FIRST_BAD = dt.date(2026, 5, 21)


@pytest.fixture(autouse=True, scope="session")
def _private_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the default caches and history of every test out of the real ~/.cache."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved


@pytest.fixture(scope="session")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Mirror:
    """30 dated builds (one date missing) with an Inductor precision regression from 05-21."""
    return build_mirror(tmp_path_factory.mktemp("mirror"), first_bad=FIRST_BAD)


@pytest.fixture(scope="session")
def index_server(mirror: Mirror) -> Iterator[IndexServer]:
    with IndexServer(mirror.root) as server:
        yield server


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One environment cache for the session: environments are keyed by build, so sharing is safe."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def example_script(tmp_path: Path) -> Path:
    from bot.jobs.demo import example_path

    return example_path(tmp_path, "cumsum_repro.py")
