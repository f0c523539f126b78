"""Namespace sandbox: hostile reproducers run through the real runner, `unshare` and a uv env."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters import sandbox_launcher
from bot.adapters.runner import NoSandbox, Runner
from bot.adapters.sandbox import Limits, NamespaceSandbox, SandboxUnavailable, make_sandbox
from bot.core.bisection import Bisection
from bot.core.verdicts import Verdict
from bot.demo.index_server import IndexServer
from bot.demo.mirror import build_mirror
from bot.jobs import local
from bot.jobs.local import python_tag
from tests.fakes.sandbox_attacks import (
    CONNECT,
    READ_ENVIRON,
    SECRET,
    TEST_LIMITS,
    WRITE_OUTSIDE,
    Attacks,
    Env,
    Listener,
    listener,
    make_env,
    run,
    survivors,
    token_holder,
)

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

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


class TestNamespaceSandboxForGpuRuns(Attacks):
    """The same attacks with the GPU settings (a writable /proc, device groups): still confined."""

    @pytest.fixture
    def runner(self, env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
        monkeypatch.setenv("GITHUB_TOKEN", SECRET)
        sandbox = NamespaceSandbox(TEST_LIMITS, hide=[env.cache_root], gpu=True)
        sandbox.available()
        yield Runner(sandbox)

    def test_proc_is_writable_but_the_root_is_not(
        self, runner: Runner, env: Env, tmp_path: Path
    ) -> None:
        result = run(runner, env, tmp_path, (
            "import os\n"
            "open('/proc/self/comm', 'w').write('renamed')\n"
            "for path in ('/etc/tbb-x', '/usr/tbb-x', '/dev/tbb-x'):\n"
            "    try:\n"
            "        open(path, 'w').write('x')\n"
            "        print('WROTE', path)\n"
            "    except OSError as exc:\n"
            "        print('refused', path, exc.errno)\n"
        ))
        assert result.exit_code == 0, result.output
        assert "WROTE" not in result.output and result.output.count("refused") == 3


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


def test_preflight_starts_the_interpreter(tmp_path: Path) -> None:
    """An interpreter the run cannot start (its files not executable by the run's user: a
    Python installed with umask 077) is said once, before any build is installed, naming it;
    it was every probe's SKIP ("the sandbox could not run it"), then "Cannot test"."""
    python = tmp_path / "prefix" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho ok\n")
    python.chmod(0o644)
    with pytest.raises(SandboxUnavailable) as raised:
        NamespaceSandbox().available(python)
    said = str(raised.value)
    assert f"cannot start {python}" in said and "Permission denied" in said, said
    assert f"chmod -R o+rX {tmp_path / 'prefix'}" in said, said
    NamespaceSandbox().available()  # the bot's own Python starts


HOSTILE_REPRO = """import os, socket, subprocess, sys, time
import torch
if torch.__version__ == {hostile!r}:
    print("token:", os.environ.get("GITHUB_TOKEN", "no token"), flush=True)
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=1)
    except OSError as exc:
        print("no network:", exc, flush=True)
    for victim in ({canary!r}, {cache!r}):
        try:
            open(os.path.join(victim, "pwned"), "w").write("x")
        except OSError as exc:
            print("refused:", exc, flush=True)
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)", {marker!r}],
                     start_new_session=True)
    time.sleep(1000)
""" + (Path(__file__).parents[2] / "bot" / "demo" / "data" / "cumsum_repro.py").read_text()


def _probe_order(versions: tuple[str, ...], first_bad: str) -> list[int]:
    """The builds the engine will probe when each behaves as the mirror planted it."""
    bisection, probed = Bisection(len(versions), 0), []
    while bisection.outcome is None:
        index = bisection.next_probes(1)[0]
        probed.append(index)
        bad = versions[index] >= first_bad
        bisection = bisection.record(index, Verdict.BAD if bad else Verdict.GOOD)
    return probed


def test_a_hostile_build_does_not_derail_the_bisection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listener: tuple[Listener, int],
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    mirror = build_mirror(tmp_path / "mirror", python_tags=(python_tag(PYTHON),))
    assert mirror.first_bad is not None
    probes = _probe_order(mirror.versions, mirror.first_bad)
    hostile = mirror.versions[next(i for i in probes if 0 < i < len(mirror.versions) - 1)]
    server, port = listener
    marker, cache = uuid.uuid4().hex, tmp_path / "cache"
    script = tmp_path / "repro.py"
    script.write_text(HOSTILE_REPRO.format(hostile=hostile, port=port, canary=str(tmp_path),
                                           cache=str(cache), marker=marker))
    with IndexServer(mirror.root) as index:
        parser = argparse.ArgumentParser()
        local.add_bisect_arguments(parser)
        args = parser.parse_args([
            str(script), "--index", index.variant_url(mirror.variant), "--good", "2026-05-01",
            "--cache-dir", str(cache), "--no-default-packages", "--timeout", "5",
            "--sandbox", "namespace", "--json", str(tmp_path / "report.json"),
        ])
        assert local.bisect_main(args) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["first_bad"] == mirror.first_bad
    record = next(p for p in report["probe_records"] if p["version"] == hostile)
    assert record["verdict"] == "skip" and record["result"]["timed_out"]
    assert "no token" in record["result"]["output"] and SECRET not in json.dumps(report)
    assert server.connections == [] and not (tmp_path / "pwned").exists()
    assert not (cache / "pwned").exists() and survivors(marker) == []


NON_ROOT_ATTACK = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
home, kept = sys.argv[1], sys.argv[2]


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


print("caps", open("/proc/self/status").read().split("CapEff:")[1].split()[0])
while libc.umount2(home.encode(), 2) == 0:  # MNT_DETACH: the tmpfs over the hidden home
    print("unmounted", home)
writable = 0
for line in open("/proc/self/mountinfo"):  # mount_setattr: clear MOUNT_ATTR_RDONLY
    point = line.split()[4].encode().decode("unicode_escape")
    attr = MountAttr(attr_clr=1)
    writable += libc.syscall(442, -100, point.encode(), 0, ctypes.byref(attr),
                             ctypes.sizeof(attr)) == 0
print("made writable", writable)
for what, act in (("secret", lambda: open(os.path.join(home, "secret")).read()),
                  ("write", lambda: open(os.path.join(kept, "poisoned"), "w").write("x"))):
    try:
        print(what, "GOT", act())
    except OSError as error:
        print(what, "blocked", error.errno)
import signal, time
os.kill(1, signal.SIGINT)  # the namespace's PID 1: its KeyboardInterrupt was the failure
time.sleep(0.5)
print("PID 1 interrupted, still here", flush=True)
'''

NON_ROOT_DRIVER = r'''
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from bot.adapters.runner import Runner
from bot.adapters.sandbox import make_sandbox
home, kept, attack = Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
result = Runner(make_sandbox("namespace", hide=[home])).run(
    Path(sys.executable), attack, timeout_s=60, readonly=[kept], args=[str(home), str(kept)])
print(result.output)
'''


def test_a_sandbox_made_by_a_bot_that_is_not_root_cannot_be_taken_apart(tmp_path: Path) -> None:
    """A self-hosted runner runs the bot as an ordinary user: the sandbox is then a user
    namespace of its own, where the reproducer is uid 0. With the namespace's capabilities it
    could unmount what hides the bot's home and clear the read-only flags; it has none."""
    import shutil
    import stat
    import tempfile

    python = shutil.which("python3", path="/usr/bin:/bin")
    assert python, "a system python3 that an unprivileged user can run is needed"
    assert shutil.which("setpriv"), "util-linux's setpriv is needed"
    root = Path(tempfile.mkdtemp(prefix="tbb-nonroot-", dir="/tmp"))
    try:
        root.chmod(0o755)
        shutil.copytree(Path(__file__).resolve().parents[2] / "bot", root / "code" / "bot")
        home, kept = root / "home", root / "kept"
        for folder in (home, kept):
            folder.mkdir()
        (home / "secret").write_text("gho_not_for_reproducers")
        (root / "attack.py").write_text(NON_ROOT_ATTACK)
        (root / "driver.py").write_text(NON_ROOT_DRIVER)
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IROTH | (
                stat.S_IXOTH if path.is_dir() else 0))
        for folder in (home, kept):
            shutil.chown(folder, 65534, 65534)
        (home / "secret").chmod(0o600)
        shutil.chown(home / "secret", 65534, 65534)
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python,
             str(root / "driver.py"), str(root / "code"), str(home), str(kept),
             str(root / "attack.py")],
            capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                              "HOME": str(home)})
        out = done.stdout + done.stderr
        assert "caps 0000000000000000" in out, out
        assert "unmounted" not in out and "made writable 0" in out, out
        assert "secret blocked" in out and "write blocked" in out, out
        assert "gho_not_for_reproducers" not in out and not (kept / "poisoned").exists()
        assert "PID 1 interrupted, still here" in out, out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_sandbox_that_dies_before_its_status_came_is_cannot_test_not_bad() -> None:
    """When the OOM killer took the sandbox's first process (memory a reproducer held outside
    its processes), `unshare`'s own exit status 1 made the build BAD with its message."""
    code = sandbox_launcher.outer({"unshare": ["false"]})  # dies at once, reporting nothing
    assert code == sandbox_launcher.SETUP_FAILED


# The holes an audit found, each run as root and as a bot that is not root (uid 65534), with
# and without the GPU settings (a writable /proc, the GPU device nodes). A driver process
# plays the bot: the real runner, the real launcher, a real reproducer.
MODE_DRIVER = r'''
import ctypes, json, os, sys
from pathlib import Path
options = json.loads(sys.argv[1])
sys.path.insert(0, options["code"])
from bot.adapters.runner import Runner
from bot.adapters.sandbox import NamespaceSandbox
libc = ctypes.CDLL(None, use_errno=True)
args = list(options["args"])
if options.get("key"):  # the bot's own session keyring, holding a secret key
    keyctl, add_key = options["syscalls"]["keyctl"], options["syscalls"]["add_key"]
    assert libc.syscall(keyctl, 1, None) > 0, ctypes.get_errno()  # JOIN_SESSION_KEYRING
    secret = options["key"].encode()
    assert libc.syscall(add_key, b"user", b"tbb-test-key", secret, len(secret), -3) > 0
if options.get("pty"):  # a terminal of the bot's user, as an interactive session has
    master, slave = os.openpty()
    args = [os.ttyname(slave) if arg == "PTY" else arg for arg in args]
if options.get("seccomp"):  # the bot itself may not call keyctl (the launcher's own filter)
    sys.path.insert(0, os.path.join(options["code"], "bot", "adapters"))
    import platform, sandbox_launcher
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
    sandbox_launcher.install_seccomp(platform.machine())
sandbox = NamespaceSandbox(hide=[Path(options["home"])], gpu=options["gpu"])
result = Runner(sandbox).run(Path(sys.executable), Path(options["attack"]), timeout_s=60,
                             args=args)
print(result.output)
print("EXIT", result.exit_code, result.signal)
if options.get("pty"):
    os.set_blocking(master, False)
    try:
        print("TERMINAL GOT", os.read(master, 4096))
    except BlockingIOError:
        print("TERMINAL GOT", b"")
'''
KEY_SECRET = "gho_tbbKeyringSecret0123456789"
SYSCALLS = {"x86_64": {"keyctl": 250, "add_key": 248}, "aarch64": {"keyctl": 219, "add_key": 217}}
MODES = [pytest.param(root, gpu, id=f"{'root' if root else 'uid65534'}-{'gpu' if gpu else 'cpu'}")
         for root in (True, False) for gpu in (False, True)]


@pytest.fixture(scope="module")
def bot_tree() -> Iterator[Path]:
    """A copy of the bot and a home of its own that uid 65534 can use."""
    import shutil
    import stat
    import tempfile

    assert shutil.which("setpriv"), "util-linux's setpriv is needed"
    root = Path(tempfile.mkdtemp(prefix="tbb-modes-", dir="/tmp"))
    try:
        root.chmod(0o755)
        shutil.copytree(Path(__file__).resolve().parents[2] / "bot", root / "code" / "bot")
        (root / "driver.py").write_text(MODE_DRIVER)
        (root / "home").mkdir()
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IROTH | (
                stat.S_IXOTH if path.is_dir() else 0))
        shutil.chown(root / "home", 65534, 65534)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def confined(tree: Path, code: str, *, root: bool, gpu: bool, args: tuple[str, ...] = (),
             **options: object) -> str:
    """The output of `code` run by the sandbox of a bot that is root, or uid 65534; then what
    the driver saw."""
    import platform
    import shutil

    python = shutil.which("python3", path="/usr/bin:/bin")
    assert python, "a system python3 that an unprivileged user can run is needed"
    attack = tree / f"attack-{uuid.uuid4().hex[:8]}.py"
    attack.write_text(code)
    attack.chmod(0o644)
    config = {"code": str(tree / "code"), "home": str(tree / "home"), "attack": str(attack),
              "gpu": gpu, "args": list(args), "syscalls": SYSCALLS.get(platform.machine()),
              **options}
    command = [python, str(tree / "driver.py"), json.dumps(config)]
    if not root:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tree / "home")})
    return done.stdout + done.stderr


TERMINAL_ATTACK = r'''
import os, sys
print("pts", sorted(os.listdir("/dev/pts")))
print("dev", sorted(os.listdir("/dev")))
for path in (sys.argv[1], "/dev/tty", "/dev/console", "/dev/tty1", "/dev/ttyS0", "/dev/vcs"):
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    except OSError as exc:
        print("refused", path, exc.errno)
        continue
    print("LEAK: opened", path, flush=True)
    os.write(fd, b"\x1b]0;pwned\x07PWNED\n")
master, slave = os.openpty()  # its own terminals still work: a devpts of its own
os.write(master, b"hi\n")
print("own pty", os.ttyname(slave), os.read(slave, 3))
open("/dev/null", "w").write("x")
print("urandom", len(os.urandom(8)), len(open("/dev/zero", "rb").read(4)))
'''


@pytest.mark.parametrize(("root", "gpu"), MODES)
def test_the_host_s_terminals_are_out_of_reach(bot_tree: Path, root: bool, gpu: bool) -> None:
    """The host's /dev/pts/* belong to the bot's user: a reproducer of a bot that is not
    root, the same uid on the host, opened the user's own terminal (read what is typed, write
    escape sequences). It sees a /dev of its own: a fresh devpts, no tty, no console."""
    out = confined(bot_tree, TERMINAL_ATTACK, root=root, gpu=gpu, args=("PTY",), pty=True)
    assert "EXIT 0 None" in out, out
    assert "LEAK" not in out and "TERMINAL GOT b''" in out, out
    assert "pts ['ptmx']" in out and "own pty /dev/pts/0 b'hi\\n'" in out, out
    assert "'tty'" not in out and "'console'" not in out and "urandom 8 4" in out, out


KEYRING_ATTACK = r'''
import ctypes, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL = {"x86_64": 250, "aarch64": 219}[platform.machine()]
KEYCTL_READ, SESSION, USER_SESSION, USER = 11, -3, -5, -4
found = []
for ring in (SESSION, USER_SESSION, USER):
    buf = ctypes.create_string_buffer(4096)
    size = libc.syscall(KEYCTL, KEYCTL_READ, ring, buf, 4096)
    if size < 0:
        print("keyring", ring, "refused", ctypes.get_errno())
        continue
    found += [int.from_bytes(buf.raw[i:i + 4], "little", signed=True) for i in range(0, size, 4)]
for line in open("/proc/keys"):
    found.append(int(line.split()[0], 16))
for key in found:
    buf = ctypes.create_string_buffer(4096)
    size = libc.syscall(KEYCTL, KEYCTL_READ, key, buf, 4096)
    if size > 0 and sys.argv[1].encode() in buf.raw[:size]:
        print("LEAK: key", key, buf.raw[:size])
print("looked at", len(found), "keys")
'''


@pytest.mark.parametrize(("root", "gpu"), MODES)
def test_the_bot_s_session_keyring_is_out_of_reach(bot_tree: Path, root: bool,
                                                   gpu: bool) -> None:
    """The session keyring is inherited across fork and exec: a key the bot (or its login)
    holds there was the reproducer's to read. It runs in a new anonymous session keyring,
    and cannot call keyctl at all."""
    import platform

    if platform.machine() not in SYSCALLS:
        pytest.skip(f"keyctl's number on {platform.machine()} is not in this test")
    out = confined(bot_tree, KEYRING_ATTACK, root=root, gpu=gpu, args=(KEY_SECRET,),
                   key=KEY_SECRET)
    assert "EXIT 0 None" in out and "looked at" in out, out
    assert "LEAK" not in out and KEY_SECRET not in out.replace(f"'{KEY_SECRET}'", ""), out


def test_a_sandbox_that_cannot_leave_the_bot_s_keyring_does_not_run(bot_tree: Path) -> None:
    """A bot that may not call keyctl cannot give the reproducer a keyring of its own: the
    run is refused (SKIP: a broken sandbox), never run unprotected."""
    import os

    if os.geteuid() != 0:
        pytest.skip("the bot must be root here: without it, the filter refuses its unshare")
    out = confined(bot_tree, "print('RAN')\n", root=True, gpu=False, seccomp=True)
    assert "RAN" not in out and f"EXIT {sandbox_launcher.SETUP_FAILED} None" in out, out
    assert "torch-bisect-bot sandbox: cannot start" in out, out
    assert "cannot leave the bot's session keyring" in out, out


NESTED_USERNS_ATTACK = r'''
import ctypes, errno, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x20000
try:  # the audit's attack: with a writable /proc (GPU runs) it maps itself to root
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "--mount", "sh",
                           "-c", "mount -t tmpfs none /mnt && echo LEAK: unshare mounted"],
                          capture_output=True, text=True, timeout=20)
    print("unshare(1)", done.returncode, done.stdout.strip(), done.stderr.strip()[-120:])
except FileNotFoundError:
    print("no unshare(1)")
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0:
    caps = open("/proc/self/status").read().split("CapEff:")[1].split()[0]
    print("LEAK: a user namespace of its own, capabilities", caps, flush=True)
    if libc.mount(b"none", b"/mnt", b"tmpfs", 0, b"size=1g") == 0:
        print("LEAK: mounted a tmpfs of its own", flush=True)
else:
    print("unshare refused", errno.errorcode[ctypes.get_errno()])
returned = libc.syscall(435, None, 0)  # clone3(NULL, 0): its flags cannot be seen
print("clone3", errno.errorcode[ctypes.get_errno()] if returned < 0 else "returned")
print("a child still starts:", subprocess.run(["echo", "yes"], capture_output=True,
                                              text=True).stdout.strip())
'''


@pytest.mark.parametrize(("root", "gpu"), MODES)
def test_no_user_namespace_of_its_own(bot_tree: Path, root: bool, gpu: bool) -> None:
    """Inside a new user namespace the reproducer held every capability there: with a GPU
    run's writable /proc it mapped itself to root and mounted an uncapped tmpfs. A seccomp
    filter refuses unshare and clone with CLONE_NEWUSER, and clone3 (glibc falls back to
    clone, as a child that still starts shows)."""
    out = confined(bot_tree, NESTED_USERNS_ATTACK, root=root, gpu=gpu)
    assert "EXIT 0 None" in out, out
    assert "LEAK" not in out and "unshare refused EPERM" in out, out
    assert "clone3 ENOSYS" in out and "a child still starts: yes" in out, out


@pytest.mark.parametrize(("root", "gpu"), MODES)
def test_the_shared_memory_cap_cannot_be_raised(bot_tree: Path, root: bool, gpu: bool) -> None:
    """A bot that is not root owns the run's IPC namespace's sysctls through its user
    namespace: with a GPU run's writable /proc, the reproducer raised kernel.shmmax."""
    from tests.fakes.sandbox_attacks import RAISE_SHM

    out = confined(bot_tree, RAISE_SHM, root=root, gpu=gpu)
    assert "EXIT 0 None" in out and "LEAK" not in out, out
    assert int(out.split("shmmax=")[1].split()[0]) <= Limits().tmpfs_bytes, out


def _fake_prefix_in(home: Path) -> Path:
    """An interpreter's prefix that is `home` (~/bin/python): bin/ and lib/ of its own, and
    a token beside them, as ~/.config/gh/hosts.yml is."""
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".config" / "gh" / "hosts.yml").write_text(f"oauth_token: {SECRET}\n")
    for part in ("bin", "lib"):
        (home / part).mkdir()
        (home / part / "tool").write_text("a part of the interpreter\n")
    return home


READ_HOME = """import sys
home = sys.argv[1]
try:
    print("LEAK:", open(home + "/.config/gh/hosts.yml").read())
except OSError as exc:
    print("hidden", exc.errno)
for part in ("bin", "lib"):
    print(part, open(home + "/" + part + "/tool").read().strip())
"""


@pytest.mark.parametrize("how", ["pyvenv-home", "environment-is-home"])
def test_an_exposed_path_never_shows_a_hidden_one(env: Env, tmp_path: Path, how: str) -> None:
    """An environment whose pyvenv.cfg `home` is ~/bin (its prefix is ~), or an interpreter
    triaged as `--python ~/bin/python` (the environment's path is ~): the launcher bound ~
    back, tokens and all. Only the prefix's bin/, lib/, ... are shown."""
    home = _fake_prefix_in(tmp_path / "home")
    shown = tmp_path / "venv"
    shown.mkdir()
    (shown / "pyvenv.cfg").write_text(f"home = {home / 'bin'}\n")
    sandbox = NamespaceSandbox(TEST_LIMITS, hide=[home, env.cache_root])
    readonly = [env.path, shown if how == "pyvenv-home" else home]
    script = tmp_path / "repro.py"
    script.write_text(READ_HOME)
    result = Runner(sandbox).run(env.python, script, timeout_s=30, readonly=readonly,
                                 args=[str(home)])
    assert result.exit_code == 0, result.output
    assert "LEAK" not in result.output and SECRET not in result.output, result.output
    assert "hidden 2" in result.output, result.output
    assert "bin a part of the interpreter" in result.output, result.output
    assert "lib a part of the interpreter" in result.output, result.output


def test_a_prefix_whose_parts_hold_a_hidden_path_is_refused(tmp_path: Path) -> None:
    home = _fake_prefix_in(tmp_path / "home")
    sandbox = NamespaceSandbox(TEST_LIMITS, hide=[home, home / "lib" / "cache"])
    with pytest.raises(SandboxUnavailable, match="hides"):
        sandbox.wrap(["/bin/true"], tmp_path, [home])


def test_an_environment_under_a_folder_others_cannot_enter_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyenv's Python under /root (0700) while $HOME is elsewhere: a root bot's run, as a
    throwaway uid, could not start it ("cannot start .../bin/python: Permission denied"), so
    every probe was SKIP. The closed folder is hidden as $HOME is, the environment shown."""
    import os
    import shutil
    import tempfile

    home = Path.home()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the closed folder is not the home
    closed = Path(tempfile.mkdtemp(prefix="tbb-closed-", dir=home))  # 0700, outside /tmp
    try:
        environment = make_env(closed).path
        (closed / "secret").write_text(SECRET)
        script = tmp_path / "repro.py"
        script.write_text("import os, sys\nprint('ran', sys.version_info[0])\n"
                          f"print(sorted(os.listdir({str(closed)!r})))\n")
        result = Runner(NamespaceSandbox(TEST_LIMITS)).run(
            environment / "bin" / "python", script, timeout_s=60, readonly=[environment])
    finally:
        shutil.rmtree(closed, ignore_errors=True)
    assert result.exit_code == 0, result.output
    assert "ran 3" in result.output, result.output
    # as root the run sees the way to the environment, not the rest (the bot's own uid may
    # list the folder: it is the owner)
    shown = "['cache']" if os.geteuid() == 0 else "['cache', 'secret']"
    assert shown in result.output, result.output


def test_an_environment_reached_through_a_link_runs(tmp_path: Path) -> None:
    """A cache reached through a symbolic link (~/.cache on a larger disk), hidden as the CLI
    hides it: the environment is shown at its real path, and the run was started by the
    link's path, which the sandbox hides (every probe SKIP, "No such file or directory")."""
    real = tmp_path / "disk"
    real.mkdir()
    (tmp_path / "home-cache").symlink_to(real)
    linked = make_env(tmp_path / "home-cache")
    runner = Runner(NamespaceSandbox(TEST_LIMITS, hide=[linked.cache_root]))
    result = run(runner, linked, tmp_path, "import sys\nprint('ran', sys.prefix)\n")
    assert result.exit_code == 0, result
    assert f"ran {linked.path.resolve()}" in result.output, result.output
