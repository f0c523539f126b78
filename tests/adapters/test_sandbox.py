"""Namespace sandbox: hostile reproducers run through the real runner, `unshare` and a uv env."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters.runner import NoSandbox, Runner
from bot.adapters.sandbox import NamespaceSandbox, SandboxUnavailable, make_sandbox
from tests.fakes.sandbox_attacks import (
    CONNECT,
    READ_ENVIRON,
    SECRET,
    TEST_LIMITS,
    WRITE_OUTSIDE,
    Attacks,
    Env,
    listener,
    make_env,
    run,
    token_holder,
)

__all__ = ["listener", "token_holder"]  # fixtures, imported so pytest finds them here


@pytest.fixture(scope="session")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return make_env(tmp_path_factory.mktemp("namespace"))


@pytest.fixture
def runner(env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)  # the bot holds a token; the runner reads it here
    sandbox = NamespaceSandbox(TEST_LIMITS, hide=[env.cache_root])
    sandbox.available()
    yield Runner(sandbox)


class TestNamespaceSandbox(Attacks):
    """Every attack of the shared suite, confined by namespaces, rlimits and a read-only view."""


def test_the_attacks_work_without_a_sandbox(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    listener: tuple[object, int], token_holder: subprocess.Popen[bytes],
) -> None:
    """The suite can fail: unconfined, the same reproducers find the token and reach out.
    (The variable itself is kept out by the runner's allowlist, with or without a sandbox.)"""
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    runner = Runner(NoSandbox())
    assert "LEAK" in run(runner, env, tmp_path, READ_ENVIRON, SECRET).output
    assert "LEAK: connected" in run(runner, env, tmp_path, CONNECT, str(listener[1])).output
    target = tmp_path / "outside"
    assert "LEAK" in run(runner, env, tmp_path, WRITE_OUTSIDE, str(target)).output
    assert target.read_text() == "pwned"


def test_none_warns_loudly(capsys: pytest.CaptureFixture[str]) -> None:
    assert isinstance(make_sandbox("none"), NoSandbox)
    assert "UNCONFINED" in capsys.readouterr().err


def test_default_is_namespace_on_linux() -> None:
    assert isinstance(make_sandbox(None), NamespaceSandbox)


def test_cuda_turns_the_address_space_limit_off() -> None:
    sandbox = make_sandbox("namespace", cuda=True)
    assert isinstance(sandbox, NamespaceSandbox)
    assert sandbox.limits.address_space_bytes is None
    assert "AS" not in sandbox.limits.rlimits(64)


def test_preflight_names_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailable, match="unshare"):
        NamespaceSandbox().available()
