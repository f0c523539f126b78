"""Snapshot tests: `pytest --update-snapshots` (or UPDATE_SNAPSHOTS=1) rewrites tests/core/snapshots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SNAPSHOTS = Path(__file__).parent / "snapshots"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-snapshots", action="store_true",
                     help="rewrite the Markdown snapshots under tests/core/snapshots")


@pytest.fixture
def snapshot(request: pytest.FixtureRequest):
    update = request.config.getoption("--update-snapshots") or os.environ.get(
        "UPDATE_SNAPSHOTS") == "1"

    def check(name: str, text: str) -> None:
        path = SNAPSHOTS / name
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        assert path.exists(), f"no snapshot {name}: run pytest --update-snapshots"
        assert text == path.read_text(encoding="utf-8"), f"{name} changed; review, then update"

    return check
