"""Container sandbox: the same hostile reproducers, each in a real container of the runner image."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import docker
import pytest
import requests
from docker.errors import DockerException

from bot.adapters.container import DEFAULT_IMAGE, ContainerSandbox, exit_status
from bot.adapters.runner import Runner
from bot.adapters.sandbox import SandboxUnavailable
from tests.fakes.sandbox_attacks import (
    SECRET,
    TEST_LIMITS,
    Attacks,
    Env,
    listener,
    make_env,
    token_holder,
)

__all__ = ["listener", "token_holder"]  # fixtures, imported so pytest finds them here


def _engine_reason() -> str | None:
    try:
        docker.from_env().ping()
    except (DockerException, requests.RequestException) as exc:
        return f"no Docker engine reachable ({exc}); scripts/ci-docker.sh starts one"
    return None


pytestmark = [pytest.mark.docker,
              pytest.mark.skipif(_engine_reason() is not None, reason=str(_engine_reason()))]


@pytest.fixture(scope="session")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return make_env(tmp_path_factory.mktemp("container"))


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    sandbox = ContainerSandbox(limits=TEST_LIMITS)
    sandbox.available()  # a missing image fails here, loudly: CI builds it
    yield Runner(sandbox)


class TestContainerSandbox(Attacks):
    """Every attack of the shared suite, confined by a container with no network."""


def test_no_container_is_left_behind(runner: Runner, env: Env, tmp_path: object) -> None:
    labels = {"label": "torch-bisect-bot.probe"}
    assert docker.from_env().containers.list(all=True, filters=labels) == []


KILLED_BOT = """
import sys
from pathlib import Path
from bot.adapters.container import ContainerSandbox
from bot.adapters.runner import Runner
script = Path(sys.argv[2])
script.write_text("import time\\nprint('started', flush=True)\\ntime.sleep(600)\\n")
Runner(ContainerSandbox(orphan_grace_s=1)).run(Path(sys.argv[1]), script, timeout_s=4,
                                               readonly=[Path(sys.argv[3])])
"""


def test_a_killed_bot_leaves_no_container_running_past_its_deadline(env: Env, tmp_path) -> None:
    """kill -9 of the bot mid-probe: the container still dies at deadline + grace (coreutils
    timeout inside it), and the next bot's sandbox removes the exited leftover."""
    engine = docker.from_env()
    labels = {"label": "torch-bisect-bot.probe"}
    bot = subprocess.Popen([sys.executable, "-c", KILLED_BOT, str(env.python),
                            str(tmp_path / "sleeper.py"), str(env.path)])
    try:
        deadline = time.monotonic() + 60
        while not engine.containers.list(filters={**labels, "status": "running"}):
            assert time.monotonic() < deadline, "the probe's container never started"
            time.sleep(0.2)
    finally:
        bot.kill()
        bot.wait()
    deadline = time.monotonic() + 30
    while engine.containers.list(filters={**labels, "status": "running"}):
        assert time.monotonic() < deadline, "an orphaned container is still running"
        time.sleep(0.5)
    ContainerSandbox().available()
    assert engine.containers.list(all=True, filters=labels) == []



def test_a_cancelled_probe_s_container_is_killed(runner: Runner, env: Env, tmp_path) -> None:
    """A probe that its round made moot is stopped: its container dies, and is removed."""
    engine = docker.from_env()
    labels = {"label": "torch-bisect-bot.probe"}
    script = tmp_path / "sleeper.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    cancel = threading.Event()

    def cancel_once_running() -> None:
        deadline = time.monotonic() + 60
        while (not engine.containers.list(filters={**labels, "status": "running"})
               and time.monotonic() < deadline):
            time.sleep(0.1)
        cancel.set()

    threading.Thread(target=cancel_once_running, daemon=True).start()
    began = time.monotonic()
    result = runner.run(env.python, script, timeout_s=120, readonly=[env.path], cancel=cancel)
    assert not result.timed_out and time.monotonic() - began < 90  # killed, not timed out
    assert result.exit_code != 0
    assert engine.containers.list(all=True, filters=labels) == []

def test_a_missing_image_is_a_clear_error() -> None:
    with pytest.raises(SandboxUnavailable, match="docker build"):
        ContainerSandbox(image="tbb-no-such-image:never").available()


def test_signal_deaths_are_reported_as_signals() -> None:
    assert exit_status(139) == (None, 11)
    assert exit_status(1) == (1, None)
    assert DEFAULT_IMAGE.startswith("torch-bisect-bot")


def test_prefetch_in_the_bot_s_image_keeps_to_the_container_s_cpu_limit() -> None:
    """`docker run --cpus 1` leaves every core in the affinity mask; the bot inside sizes its
    prefetch threads by the limit (its cgroup's CPU quota) instead."""
    import os

    client = docker.from_env()
    command = ["python", "-c", "from bot.adapters.cpus import usable_cores; print(usable_cores())"]
    limited = client.containers.run(DEFAULT_IMAGE, command, nano_cpus=10**9,
                                    network_mode="none", remove=True)
    unlimited = client.containers.run(DEFAULT_IMAGE, command, network_mode="none",
                                      remove=True)
    assert int(limited) == 1
    assert int(unlimited) == len(os.sched_getaffinity(0))
