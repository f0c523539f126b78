"""Container sandbox: the same hostile reproducers, each in a real container of the runner image."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import requests
from docker.errors import DockerException

from bot.adapters.container import DEFAULT_IMAGE, ContainerSandbox, exit_status
from bot.adapters.runner import Runner
from bot.adapters.sandbox import SandboxUnavailable, make_sandbox
from bot.core.verdicts import Policy, Verdict, judge
from tests.fakes.sandbox_attacks import (
    SECRET,
    TEST_LIMITS,
    TIMEOUT_S,
    Attacks,
    Env,
    listener,
    make_env,
    token_holder,
)
from tests.fakes.sandbox_attacks import run as attack

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
script.write_text(sys.argv[4] + "import time\\nprint('started', flush=True)\\ntime.sleep(600)\\n")
Runner(ContainerSandbox(orphan_grace_s=1)).run(Path(sys.argv[1]), script, timeout_s=12,
                                               readonly=[Path(sys.argv[3])])
"""


# A reproducer that stops its launcher, so that the launcher's alarm never runs. The launcher
# now runs as root and the reproducer as 65534, so the kill is refused (EPERM); the reproducer
# sleeps on either way, as a hostile one would. (Refused and unhandled, it ended the run at
# once, and the test passed only when a poll caught the container in that moment.)
STOP_THE_LAUNCHER = ("import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGSTOP)\n"
                     "except PermissionError:\n    pass\n")


@pytest.mark.parametrize("prelude", ["", STOP_THE_LAUNCHER], ids=["honest", "stops-launcher"])
def test_a_killed_bot_leaves_no_container_running_past_its_deadline(env: Env, tmp_path,
                                                                    prelude: str) -> None:
    """kill -9 of the bot mid-probe: the container still dies at deadline + grace (its
    launcher's own alarm), and the next bot's sandbox removes the exited leftover. The
    reproducer cannot keep the alarm from ringing: it stopped its launcher (the same uid)
    with SIGSTOP, and its container ran on for good (found by a red-team session)."""
    engine = docker.from_env()
    labels = {"label": "torch-bisect-bot.probe"}
    bot = subprocess.Popen([sys.executable, "-c", KILLED_BOT, str(env.python),
                            str(tmp_path / "sleeper.py"), str(env.path), prelude])
    try:
        deadline = time.monotonic() + 60
        # The run's timeout (12 s) leaves the poll time to see the container running on a
        # loaded machine, where one `docker ps` can take seconds: at 4 s the bot once timed
        # the probe out, removed its container and ended before a poll came.
        while not engine.containers.list(filters={**labels, "status": "running"}):
            assert bot.poll() is None, "the bot ended before its container was seen running"
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

def test_a_container_left_created_is_removed_once_it_is_old() -> None:
    """A bot killed between create and start leaves a container "created" for good; the
    preflight removed only exited and dead ones. A young one may be another bot's, about to
    be started: kept."""
    engine = docker.from_env()
    left = engine.containers.create(DEFAULT_IMAGE, labels={"torch-bisect-bot.probe": "1"},
                                    network_mode="none")
    try:
        ContainerSandbox().available()
        assert left.id in _container_ids(engine)  # just made: kept
        ContainerSandbox(clock=lambda: time.time() + 3600).available()
        assert left.id not in _container_ids(engine)
    finally:
        with contextlib.suppress(DockerException):
            left.remove(force=True)


def _container_ids(engine: docker.DockerClient) -> set[str]:
    return {c.id for c in engine.containers.list(all=True, sparse=True)}


def test_a_missing_image_is_a_clear_error() -> None:
    """It says how to build the image, also where no registry can be reached."""
    with pytest.raises(SandboxUnavailable, match="docker build") as raised:
        ContainerSandbox(image="tbb-no-such-image:never").available()
    assert "where no registry can be reached `sudo scripts/ci-docker.sh`" in str(raised.value)


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


# --- A broken sandbox is SKIP with its own reason, never BAD and never a traceback ---------


def test_an_interpreter_missing_from_the_image_is_a_sandbox_skip(runner: Runner,
                                                                 tmp_path: Path) -> None:
    """An environment whose bin/python links to a base interpreter the container lacks (a
    system prefix is never mounted over the image's): the launcher cannot start it. With
    coreutils `timeout` this was exit 127, judged BAD."""
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to("/usr/local/bin/tbb-no-such-python3.99")
    script = tmp_path / "repro.py"
    script.write_text("print('never runs')\n")
    result = runner.run(env / "bin" / "python", script, timeout_s=TIMEOUT_S, readonly=[env])
    judgement = judge(result, Policy())
    assert judgement.verdict is Verdict.SKIP, judgement
    assert judgement.reason.startswith("the sandbox could not run it: cannot start "), judgement
    assert "never runs" not in result.output


def _engine_has_gpus() -> bool:
    return "nvidia" in (docker.from_env().info().get("Runtimes") or {})


@pytest.mark.skipif(_engine_has_gpus(), reason="this engine can give containers GPUs")
def test_a_gpu_run_on_an_engine_without_gpus_is_a_sandbox_skip(env: Env, tmp_path) -> None:
    """A CUDA reproducer under --sandbox docker on an engine without the NVIDIA Container
    Toolkit: `start` fails ("could not select device driver"), which was a traceback."""
    sandbox = ContainerSandbox(limits=TEST_LIMITS.for_cuda(), gpus=True)
    script = tmp_path / "repro.py"
    script.write_text("print('never runs')\n")
    result = Runner(sandbox).run(env.python, script, timeout_s=TIMEOUT_S, readonly=[env.path])
    judgement = judge(result, Policy())
    assert judgement.verdict is Verdict.SKIP, judgement
    assert judgement.reason.startswith("the sandbox could not run it: cannot start the "
                                       "container: could not select device driver"), judgement
    assert docker.from_env().containers.list(
        all=True, filters={"label": "torch-bisect-bot.probe"}) == []


@pytest.mark.skipif(_engine_has_gpus(), reason="this engine can give containers GPUs")
def test_the_preflight_says_when_docker_cannot_give_a_gpu_run_gpus() -> None:
    with pytest.raises(SandboxUnavailable, match="NVIDIA Container Toolkit"):
        ContainerSandbox(limits=TEST_LIMITS.for_cuda(), gpus=True).available()
    ContainerSandbox(limits=TEST_LIMITS).available()  # without GPUs it works


def test_a_container_that_cannot_be_created_is_a_sandbox_skip(env: Env, tmp_path) -> None:
    """Was "import torch failed: cannot create the container"."""
    sandbox = ContainerSandbox(image="tbb-no-such-image:never", limits=TEST_LIMITS)
    script = tmp_path / "repro.py"
    script.write_text("print('never runs')\n")
    result = Runner(sandbox).run(env.python, script, timeout_s=TIMEOUT_S, readonly=[env.path])
    judgement = judge(result, Policy())
    assert judgement.verdict is Verdict.SKIP, judgement
    assert judgement.reason.startswith(
        "the sandbox could not run it: cannot create the container: "), judgement


# --- Parity with the namespace mode ---------------------------------------------------------

# 100 MB as files and 100 MB as shared memory blocks, in pieces below the file size limit.
SHARED_MEMORY = """import os
from multiprocessing import shared_memory
print("shm size", os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize)
for piece in range(4):  # as torch's file_system sharing strategy does
    with open(f"/dev/shm/tbb-big-{piece}", "wb") as out:
        out.write(b"x" * 25 * 2**20)
blocks = [shared_memory.SharedMemory(create=True, size=25 * 2**20) for _ in range(4)]
for block in blocks:  # DataLoader workers' way; beyond /dev/shm's room: SIGBUS
    block.buf[:] = b"y" * block.size
print("wrote 200 MB")
for block in blocks:
    block.close()
    block.unlink()
"""


def test_dev_shm_is_as_large_as_the_namespace_mode_s(runner: Runner, env: Env,
                                                     tmp_path) -> None:
    """Docker's default /dev/shm is 64 MiB: DataLoader workers died of a Bus error under
    --sandbox docker alone. It is the limits' tmpfs size, as in the namespace mode."""
    result = attack(runner, env, tmp_path, SHARED_MEMORY)
    assert result.exit_code == 0 and result.signal is None, result
    assert "wrote 200 MB" in result.output
    assert f"shm size {TEST_LIMITS.tmpfs_bytes}\n" in result.output, result.output


def test_an_exit_status_of_139_is_an_exit_not_a_sigsegv(runner: Runner, env: Env,
                                                        tmp_path) -> None:
    """As in the namespace mode: `sys.exit(139)` is exit 139, a real SIGSEGV is a crash
    (docker's own status is 139 for both)."""
    exited = attack(runner, env, tmp_path, "import sys\nsys.exit(139)\n")
    assert (exited.exit_code, exited.signal) == (139, None), exited
    assert judge(exited, Policy()).signature == "exit 139"
    crashed = attack(runner, env, tmp_path, "import os, signal\nos.kill(os.getpid(), "
                     "signal.SIGSEGV)\n")
    assert (crashed.exit_code, crashed.signal) == (None, signal.SIGSEGV), crashed
    assert judge(crashed, Policy()).signature == "crash (SIGSEGV)"
    assert "torch-bisect-bot launcher" not in exited.output + crashed.output


def _have_image(name: str) -> bool:
    try:
        docker.from_env().images.get(name)
    except DockerException:
        return False
    return True


@pytest.mark.skipif(not _have_image("tbb-base:bookworm"),
                    reason="no tbb-base:bookworm (scripts/ci-docker.sh makes it)")
def test_an_image_without_the_launcher_is_a_sandbox_skip(tmp_path) -> None:
    """An image not built from the Dockerfile has no launcher Python: the run never started."""
    sandbox = ContainerSandbox(image="tbb-base:bookworm", limits=TEST_LIMITS)
    script = tmp_path / "repro.py"
    script.write_text("print('never runs')\n")
    judgement = judge(Runner(sandbox).run(Path("/usr/bin/python3"), script, timeout_s=TIMEOUT_S),
                      Policy())
    assert judgement.verdict is Verdict.SKIP, judgement
    assert "its launcher" in judgement.reason and "did not start" in judgement.reason, judgement
    with pytest.raises(SandboxUnavailable, match="its launcher"):
        sandbox.available()


# --- The preflight starts the interpreter the runs start ------------------------------------


def test_the_preflight_starts_the_interpreter_in_a_container(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bot whose Python (which the environments are made from) the container's user cannot
    start (installed with umask 077: it runs for its owner, the bot, not for uid 65534) is
    told once, before any build is installed, naming it and what to do; the preflight only
    ran `/bin/sh`, so it was every probe's SKIP ("the sandbox could not run it"), then
    "cannot test"."""
    python = tmp_path / "prefix" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho ok\n")
    python.chmod(0o700)
    assert subprocess.run([python], capture_output=True, text=True).stdout == "ok\n"
    with monkeypatch.context() as patched, pytest.raises(SandboxUnavailable) as raised:
        patched.setattr(sys, "executable", str(python))
        make_sandbox("docker")  # as the CLI makes it
    said = str(raised.value)
    assert f"cannot start {python} in a container of {DEFAULT_IMAGE}" in said, said
    assert "Permission denied" in said and f"chmod -R o+rX {tmp_path / 'prefix'}" in said, said
    ContainerSandbox(limits=TEST_LIMITS).available()  # the bot's own Python starts there


def test_the_preflight_says_when_the_image_lacks_a_system_python(env: Env) -> None:
    """A system prefix is never mounted over the image's: a bot on the host's /usr Python
    with an image of another Python needs the image to ship it, and is told so."""
    python = Path("/usr/local/bin/tbb-no-such-python3.99")
    with pytest.raises(SandboxUnavailable) as raised:
        ContainerSandbox(limits=TEST_LIMITS).available(python)
    said = str(raised.value)
    assert f"cannot start {python}" in said and "No such file or directory" in said, said
    assert "the image must ship this Python at the same path" in said, said
    ContainerSandbox(limits=TEST_LIMITS).available(env.python)  # a uv environment's starts


def test_an_environment_reached_through_a_link_runs(runner: Runner, tmp_path: Path) -> None:
    """A cache reached through a symbolic link (~/.cache on a larger disk, a --cache-dir
    link): the container mounts the environment at its real path only, and the run was
    started by the link's path, which the container lacks: every probe SKIP, "cannot start
    ... No such file or directory"."""
    real = tmp_path / "disk"
    real.mkdir()
    (tmp_path / "home-cache").symlink_to(real)
    linked = make_env(tmp_path / "home-cache")
    assert linked.python.parent.resolve() != linked.python.parent
    result = attack(runner, linked, tmp_path, "import sys\nprint('ran', sys.prefix)\n")
    assert result.exit_code == 0, result
    assert f"ran {linked.path.resolve()}" in result.output, result.output


def test_a_run_without_cuda_is_given_no_gpu_by_the_nvidia_runtime(env: Env,
                                                                  tmp_path: Path) -> None:
    """The bot's NVIDIA_VISIBLE_DEVICES (a GPU runner pod's, `all`) reached the container of
    a run that asked for no GPU; the NVIDIA runtime, where it is docker's default, gives a
    container the GPUs that variable names, whatever its device requests. The CUDA base
    image declares `all` itself. Now it is `void`: no GPU."""
    runner = Runner(ContainerSandbox(limits=TEST_LIMITS),
                    source_env={"NVIDIA_VISIBLE_DEVICES": "all", "GITHUB_TOKEN": SECRET})
    result = attack(runner, env, tmp_path,
                    "import os\nprint('visible', os.environ.get('NVIDIA_VISIBLE_DEVICES'))\n")
    assert result.exit_code == 0, result
    assert "visible void\n" in result.output, result.output


@pytest.mark.parametrize("how", ["pyvenv-home", "environment-is-home"])
def test_the_bot_s_home_is_never_mounted_whole(env: Env, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """An environment whose pyvenv.cfg `home` is ~/bin (its prefix is ~), or an interpreter
    triaged as `--python ~/bin/python` (the environment's path is ~): the container mounted
    the whole home, and uid 65534 read what is readable there (a checkout's .git/config with
    a persisted token, ~/.pypirc, ~/.npmrc). Only the prefix's bin/, lib/, ... are mounted, as
    in the namespace mode (found by a red-team session)."""
    from tests.adapters.test_sandbox import READ_HOME, _fake_prefix_in

    home = _fake_prefix_in(tmp_path / "home")
    monkeypatch.setenv("HOME", str(home))
    shown = tmp_path / "venv"
    shown.mkdir()
    (shown / "pyvenv.cfg").write_text(f"home = {home / 'bin'}\n")
    readonly = [env.path, shown if how == "pyvenv-home" else home]
    script = tmp_path / "repro.py"
    script.write_text(READ_HOME)
    result = Runner(ContainerSandbox(limits=TEST_LIMITS)).run(
        env.python, script, timeout_s=60, readonly=readonly, args=[str(home)])
    assert result.exit_code == 0, result.output
    assert "LEAK" not in result.output and SECRET not in result.output, result.output
    assert "hidden 2" in result.output, result.output
    assert "bin a part of the interpreter" in result.output, result.output
    assert "lib a part of the interpreter" in result.output, result.output


def test_the_reproducer_has_no_capability_and_cannot_signal_its_launcher(
        runner: Runner, env: Env, tmp_path: Path) -> None:
    """The launcher and docker-init are root, able only to change uid; the reproducer is
    uid 65534 with no capability, and cannot stop them (or read the container's stderr)."""
    result = attack(runner, env, tmp_path, (
        "import os, signal\n"
        "status = open('/proc/self/status').read()\n"
        "print('ids', os.getresuid(), os.getresgid(), os.getgroups())\n"
        "for key in ('CapEff', 'CapPrm', 'CapBnd', 'NoNewPrivs'):\n"
        "    print(key, status.split(key + ':')[1].split()[0])\n"
        "for pid in (os.getppid(), 1):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGSTOP)\n"
        "        print('LEAK: stopped', pid)\n"
        "    except PermissionError:\n"
        "        print('refused', pid)\n"
        "try:\n"
        "    open('/proc/1/fd/2', 'w').write('torch-bisect-bot launcher: returncode 0')\n"
        "    print('LEAK: wrote the launcher report')\n"
        "except OSError as exc:\n"
        "    print('refused stderr', exc.errno)\n"))
    assert result.exit_code == 0, result.output
    assert "ids (65534, 65534, 65534) (65534, 65534, 65534) []" in result.output, result.output
    assert "CapEff 0000000000000000" in result.output, result.output
    assert "CapPrm 0000000000000000" in result.output, result.output
    assert "NoNewPrivs 1" in result.output, result.output
    assert "LEAK" not in result.output and result.output.count("refused") == 3, result.output
