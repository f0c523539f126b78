"""Container sandbox, without an engine: the container asked for, and an engine that fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from docker.errors import APIError, DockerException, NotFound

from bot.adapters.container import ContainerSandbox
from bot.adapters.runner import OutputTail
from bot.adapters.sandbox import SandboxUnavailable
from bot.core.verdicts import Policy, Verdict, judge


class RecordingEngine:
    """Records what `containers.create` was asked for, and creates nothing."""

    def __init__(self) -> None:
        self.containers = self
        self.asked: list[dict[str, Any]] = []

    def create(self, *args: Any, **kwargs: Any) -> Any:
        self.asked.append(kwargs)
        raise DockerException("recorded, not created")


def _asked(tmp_path: Path, env: dict[str, str], gpus: bool = True) -> dict[str, Any]:
    engine = RecordingEngine()
    sandbox = ContainerSandbox(gpus=gpus, client=engine)
    sandbox.execute(["/env/bin/python", "repro.py"], env, tmp_path, (), 10.0, OutputTail())
    (asked,) = engine.asked
    return asked


@pytest.mark.parametrize(("visible", "ids", "inside"), [
    ("2,3", ["2", "3"], "0,1"),  # the container numbers its GPUs from 0
    ("5", ["5"], "0"),
    ("GPU-8e1c5a4b-1d2e-4f60-9a7b-0c1d2e3f4a5b", ["GPU-8e1c5a4b-1d2e-4f60-9a7b-0c1d2e3f4a5b"],
     "GPU-8e1c5a4b-1d2e-4f60-9a7b-0c1d2e3f4a5b"),
])
def test_a_gpu_run_gets_only_its_worker_s_gpus(tmp_path: Path, visible: str, ids: list[str],
                                               inside: str) -> None:
    """count=-1 gave every container every GPU, whatever the worker's CUDA_VISIBLE_DEVICES:
    a reproducer could use another worker's."""
    asked = _asked(tmp_path, {"CUDA_VISIBLE_DEVICES": visible, "NVIDIA_VISIBLE_DEVICES": "all"})
    (request,) = asked["device_requests"]
    assert request["DeviceIDs"] == ids and request["Count"] == 0, request
    assert request["Capabilities"] == [["gpu"]]
    assert asked["environment"]["CUDA_VISIBLE_DEVICES"] == inside
    # what the NVIDIA runtime reads names the same GPUs, not the bot's or the image's `all`
    assert asked["environment"]["NVIDIA_VISIBLE_DEVICES"] == ",".join(ids)


@pytest.mark.parametrize("env", [{}, {"CUDA_VISIBLE_DEVICES": "0,0"},
                                 {"CUDA_VISIBLE_DEVICES": "-1"}])
def test_a_gpu_run_without_its_own_devices_gets_every_gpu(tmp_path: Path,
                                                          env: dict[str, str]) -> None:
    asked = _asked(tmp_path, env)
    (request,) = asked["device_requests"]
    assert request["Count"] == -1 and not request["DeviceIDs"], request
    assert asked["environment"].get("CUDA_VISIBLE_DEVICES") == env.get("CUDA_VISIBLE_DEVICES")


def test_a_run_without_cuda_asks_for_no_gpu(tmp_path: Path) -> None:
    asked = _asked(tmp_path, {"CUDA_VISIBLE_DEVICES": "1", "NVIDIA_VISIBLE_DEVICES": "all"},
                   gpus=False)
    assert asked["device_requests"] == []
    assert asked["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"


class GoneContainer:
    """A container whose engine fails while the bot waits for it, and that is gone by the
    time the bot kills it."""

    def __init__(self, wait_error: Exception) -> None:
        self.wait_error = wait_error

    def attach(self, **kwargs: Any) -> Any:
        return iter(())

    def start(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> dict[str, int]:
        raise self.wait_error

    def kill(self) -> None:
        raise NotFound("No such container")

    def remove(self, force: bool = False) -> None:
        raise NotFound("No such container")


def test_an_engine_failing_mid_run_is_a_sandbox_skip_not_a_timeout() -> None:
    """Any error from `wait` was taken for the deadline, and the unguarded `kill` of a
    container already gone raised."""
    sandbox = ContainerSandbox()
    result = sandbox._run(GoneContainer(APIError("engine restarting")), 600.0, OutputTail(),
                          0.0)
    judgement = judge(result, Policy())
    assert not result.timed_out
    assert judgement.verdict is Verdict.SKIP, judgement
    assert judgement.reason.startswith("the sandbox could not run it: lost the container"), \
        judgement


def test_a_container_gone_at_its_deadline_is_still_a_timeout() -> None:
    result = ContainerSandbox()._run(GoneContainer(DockerException("read timed out")), 0.0,
                                     OutputTail(), 0.0)
    assert result.timed_out


def test_no_engine_at_docker_host_says_what_to_do(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """It said only "no Docker engine reachable" and the client's error: now where it looked
    (DOCKER_HOST, when set) and what to do about it, including the other sandbox."""
    host = f"unix://{tmp_path / 'no-such-docker.sock'}"
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(SandboxUnavailable) as raised:
        ContainerSandbox().available()
    said = str(raised.value)
    assert f"no Docker engine reachable at DOCKER_HOST={host} (" in said
    assert "check that DOCKER_HOST names a running engine" in said
    assert said.endswith("or use --sandbox namespace")
