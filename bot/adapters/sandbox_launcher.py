"""Runs one command confined: the outer half starts `unshare`, the inner half is PID 1 inside it."""

# Run as `python -I -S sandbox_launcher.py outer CONFIG_JSON` (see bot/adapters/sandbox.py).
# Standard library only, so it runs isolated from any site-packages and can be audited alone.
# Inside the new mount namespace, in order: everything read-only (mount_setattr), /proc/sys kept
# read-only when /proc is made writable (GPU runs), a minimal /dev (no terminal of the host, a
# devpts of its own), fresh tmpfs over the hidden paths (/tmp, /run, the bot's home, the env
# cache...), the environment and the base interpreter bound back read-only, the workdir as a
# size-capped tmpfs; then fork the command with rlimits, as an unprivileged uid when we are root,
# in a session keyring of its own, under a seccomp filter that refuses new user namespaces and
# the keyring calls.
# The new network namespace has only its own
# loopback, brought up so that a script's sockets on 127.0.0.1 (torchrun's rendezvous) work;
# nothing outside the namespace can be reached through it. PID 1 reports the child's status on
# a pipe, because PID 1 of a namespace cannot die by a signal it raises itself.
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import glob
import json
import os
import platform
import resource
import signal
import socket
import struct
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: this runs as `python -I -S`, per probe
    from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 1, 2, 4, 4096, 16384
SYS_MOUNT_SETATTR = 442  # the same number on x86_64 and aarch64 (Linux 5.12+)
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# linux/securebits.h: NOROOT and its lock, KEEP_CAPS locked off, NO_CAP_AMBIENT_RAISE and its
# lock. NO_SETUID_FIXUP stays off: the uid change clears the capabilities.
LOCKED_SECUREBITS = (1 << 0) | (1 << 1) | (1 << 5) | (1 << 6) | (1 << 7)
SETUP_FAILED = 125  # `git bisect run`'s "cannot test": a broken sandbox is never a BAD build
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1  # linux/sockios.h, linux/if.h
MS_NOEXEC = 8
# What stays read-only inside a writable /proc (Docker's list): /proc/sys holds the sysctls of
# the run's own namespaces (kernel.shmmax of its IPC namespace...), which a bot that is not root
# owns in its user namespace, so the reproducer could raise the caps set below.
PROC_READONLY = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
# The minimal /dev: these nodes of the host's, bound in; no tty, console, vcs, pts of the host.
DEV_NODES = ("null", "zero", "full", "random", "urandom")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}
IFREQ_SIZE = 40  # struct ifreq: a 16-byte name and a 24-byte union

libc = ctypes.CDLL(None, use_errno=True)


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                      flags, data.encode() or None), f"mount {source} on {target}")


def make_readonly(path: str, recursive: bool) -> None:
    attr = MountAttr(attr_set=MOUNT_ATTR_RDONLY)
    flags = AT_RECURSIVE if recursive else 0
    _check(libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), flags,
                        ctypes.byref(attr), ctypes.sizeof(attr)), f"read-only {path}")


def make_writable(path: str) -> None:
    """Undo the read-only flag below `path` only: bind it onto itself first unless it is a mount
    of its own, so the flag is never cleared on the root mount that contains it."""
    if not os.path.exists(path):
        return
    if not os.path.ismount(path):
        mount(path, path, None, MS_BIND | MS_REC)
    attr = MountAttr(attr_clr=MOUNT_ATTR_RDONLY)
    _check(libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), AT_RECURSIVE,
                        ctypes.byref(attr), ctypes.sizeof(attr)), f"writable {path}")


# Files a tmpfs may hold: its size bounds the bytes, not the inodes, and 3 million empty
# files held 16 GiB of kernel memory over four of them (found by an audit). Inductor's and
# Triton's caches hold thousands.
TMPFS_INODES = 131_072


def tmpfs(path: str, size: int, mode: str, uid: int | None = None) -> None:
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={size},nr_inodes={TMPFS_INODES},mode={mode}{owner}")


def shm_limits(size: int) -> dict[str, int]:
    """The System V shared memory sysctls that cap a run's segments at `size` bytes: their
    defaults are unlimited, and a segment belongs to no process the OOM killer could pick."""
    return {"shmmax": size, "shmall": size // os.sysconf("SC_PAGE_SIZE")}


def limit_shared_memory(size: int) -> None:
    """`shm_limits` in the run's own IPC namespace, before the view is made read-only (its
    /proc too)."""
    for name, value in shm_limits(size).items():
        # a kernel that keeps them read-only here: the tmpfs limits still hold
        with contextlib.suppress(OSError), open(f"/proc/sys/kernel/{name}", "w") as handle:
            handle.write(str(value))


def first_to_go() -> None:
    """Ask the OOM killer to take the reproducer before anything else on the machine: the
    bot, the runner's agent and other people's processes keep the default 0, and memory a
    reproducer holds outside its processes (tmpfs files, memfds) does not count as its own.
    Any process may raise its own score; this one (the namespace's PID 1, whose end frees its
    tmpfs mounts) takes it too."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")


def snapshot(workdir: str) -> dict[str, bytes | None]:
    """The workdir's few files (the script, an empty tmp/) to copy into its tmpfs; None = dir."""
    found: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(workdir):
        for name in dirs:
            found[os.path.relpath(os.path.join(root, name), workdir)] = None
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                found[os.path.relpath(os.path.join(root, name), workdir)] = handle.read()
    return found


def contains(outer: str, inner: str) -> bool:
    """Whether path `inner` is `outer` or lies below it."""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def check_exposed(expose: list[str], hide: list[str]) -> None:
    """An exposed path that is or holds a hidden one would bind the hidden files back (the
    bot's home with its tokens): sandbox.py narrows such paths; refuse any that slipped by."""
    for shown in expose:
        for hidden in hide:
            if contains(os.path.realpath(shown), os.path.realpath(hidden)) or contains(
                    shown, hidden):
                raise OSError(errno.EPERM, f"{shown} would show {hidden}, which is hidden")


def bind_node(source: str, target: str) -> None:
    """Bind `source` (/proc/self/fd/N of an O_PATH descriptor of the host's device node or
    folder) at `target` in the new /dev, making the mount point first."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o600))
    mount(source, target, None, MS_BIND | MS_REC)


def minimal_dev(device_patterns: list[str]) -> None:
    """Replace /dev by a tmpfs holding only null, zero, full, random, urandom, the usual links,
    an empty /dev/shm (emptied as a hidden path afterwards), a devpts instance of its own, and
    for GPU runs the GPU device nodes. The host's /dev/pts/* (the bot user's own terminals,
    which a reproducer of a bot that is not root, the same uid, could open: read what is typed
    in, write escape sequences), /dev/tty, /dev/console, the virtual consoles, and any node a
    desktop session grants its user (sound, camera) are not in it."""
    wanted = [f"/dev/{name}" for name in DEV_NODES]
    for pattern in device_patterns:
        wanted += sorted(glob.glob(pattern))
    held: dict[str, int | str] = {}
    for path in wanted:
        if path in held or not os.path.lexists(path):
            continue
        # a link (/dev/dri/by-path/...) is made again; anything else is held open to bind back
        held[path] = os.readlink(path) if os.path.islink(path) else os.open(path, os.O_PATH)
    tmpfs("/dev", 1 << 20, "0755")
    os.mkdir("/dev/pts", 0o755)
    os.mkdir("/dev/shm", 0o1777)
    mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
          "newinstance,ptmxmode=0666,mode=0620")
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"/dev/{name}")
    for path, source in sorted(held.items()):
        if isinstance(source, str):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.path.lexists(path):
                os.symlink(source, path)
            continue
        if not os.path.lexists(path):  # not under a folder bound already (/dev/dri/...)
            bind_node(f"/proc/self/fd/{source}", path)
        os.close(source)
    make_readonly("/dev", recursive=False)


def build_view(config: dict[str, Any]) -> None:
    """Everything read-only, hidden paths emptied, the environment and workdir put back."""
    check_exposed(config["expose"], config["hide"])
    held = {path: os.open(path, os.O_PATH) for path in config["expose"] if os.path.exists(path)}
    files = snapshot(config["workdir"])
    if config.get("readonly_root", True):
        make_readonly("/", recursive=True)
    for path in config.get("writable", []):  # GPU runs: the CUDA driver fails on a read-only
        make_writable(path)                  # /proc (error 304, seen on an H200)
        for inside in PROC_READONLY if path == "/proc" else ():
            if os.path.exists(inside):  # its sysctls stay read-only: bound onto itself first
                mount(inside, inside, None, MS_BIND | MS_REC)
                make_readonly(inside, recursive=True)
    minimal_dev(config.get("devices", []))
    emptied = []
    for path in sorted(config["hide"], key=len):  # a parent first; a hidden child then vanishes
        if os.path.isdir(path):
            if path in PRIVATE_TMP:
                tmpfs(path, config["tmpfs_bytes"], "1777")
            else:
                tmpfs(path, 1 << 20, "0755")  # an empty view; made read-only below
            emptied.append(path)
    for path, fd in held.items():
        os.makedirs(path, exist_ok=True)  # inside a fresh tmpfs when a parent was hidden
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        make_readonly(path, recursive=True)
        os.close(fd)
    for path in emptied:
        if path not in PRIVATE_TMP:
            make_readonly(path, recursive=False)
    workdir, uid = config["workdir"], config["uid"]
    os.makedirs(workdir, exist_ok=True)
    tmpfs(workdir, config["tmpfs_bytes"], "0700", uid)
    for relpath, data in sorted(files.items()):
        target = os.path.join(workdir, relpath)
        if data is None:
            os.makedirs(target, exist_ok=True)
        else:
            with open(target, "wb") as handle:
                handle.write(data)
        if uid is not None:
            os.chown(target, uid, uid)


def loopback_up() -> None:
    """Bring up `lo` of the new network namespace, which starts down (so 127.0.0.1 cannot even
    be bound): the namespace's own loopback, not the host's."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        asked = struct.pack("16s", b"lo").ljust(IFREQ_SIZE, b"\0")
        flags = struct.unpack_from("H", fcntl.ioctl(sock, SIOCGIFFLAGS, asked), 16)[0]
        wanted = struct.pack("16sH", b"lo", flags | IFF_UP).ljust(IFREQ_SIZE, b"\0")
        fcntl.ioctl(sock, SIOCSIFFLAGS, wanted)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 63


def give_up_capabilities() -> None:
    """Before the uid change: no capability may come back to this process or its children.

    A bot that is not root runs the sandbox in a user namespace of its own, where the
    reproducer, uid 0 there, would hold every capability of the namespace: enough to unmount
    the tmpfs over the bot's home and clear the read-only flags this sandbox set. So the
    bounding and ambient sets are emptied, and the securebits locked so that uid 0 gains
    nothing at exec (SECBIT_NOROOT) and no capability is kept across a uid change; the
    process's own sets are emptied after the uid change (`drop_capabilities`)."""
    for number in range(_last_capability() + 1):
        if libc.prctl(PR_CAPBSET_DROP, number, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            _check(-1, f"drop capability {number} from the bounding set")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient")
    _check(libc.prctl(PR_SET_SECUREBITS, LOCKED_SECUREBITS, 0, 0, 0), "securebits")


def drop_capabilities() -> None:
    """Every capability of this process, effective, permitted and inheritable, gone."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset")


# keyctl(2): the bot's session keyring (inherited across fork and exec) holds what it or its
# login stored (Kerberos tickets, a credential helper's tokens); a possessed key is readable.
KEYCTL_JOIN_SESSION_KEYRING = 1
SYSCALLS = {  # the numbers the seccomp filter checks, per machine (unistd_64.h, asm-generic)
    "x86_64": {"arch": 0xC000003E, "keyctl": 250, "add_key": 248, "request_key": 249,
               "unshare": 272, "clone": 56, "clone3": 435},
    "aarch64": {"arch": 0xC00000B7, "keyctl": 219, "add_key": 217, "request_key": 218,
                "unshare": 97, "clone": 220, "clone3": 435},
}
X32_SYSCALL_BIT = 0x40000000  # x86_64's x32 ABI: the same arch, other numbers; all refused
CLONE_NEWUSER = 0x10000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x50000, 0x7FFF0000
BPF_LD_W_ABS, BPF_JEQ, BPF_JGE, BPF_JSET, BPF_RET = 0x20, 0x15, 0x35, 0x45, 0x06
SECCOMP_NR, SECCOMP_ARCH, SECCOMP_ARG0_LOW = 0, 4, 16  # struct seccomp_data; little-endian


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The classic BPF program: a call of another arch (i386's int 0x80) kills the process,
    an x32 call fails with ENOSYS; clone3 fails with ENOSYS (its flags lie in memory, which
    the filter cannot read; glibc then falls back to clone); unshare and clone with
    CLONE_NEWUSER, and the keyring calls, fail with EPERM. A nested user namespace would give
    the reproducer every capability there (mount a tmpfs without our caps, write its uid_map
    through a writable /proc)."""
    nr = SYSCALLS.get(machine)
    if nr is None:  # fail closed: no filter we could vouch for, no run
        raise OSError(errno.ENOSYS, f"no seccomp filter for this machine ({machine})")
    eperm, enosys = SECCOMP_RET_ERRNO | errno.EPERM, SECCOMP_RET_ERRNO | errno.ENOSYS
    # A label (a str) names the next instruction; an instruction is (code, jump if true,
    # jump if false, k), its jumps given as labels (None: the next instruction).
    code: list[str | tuple[int, str | None, str | None, int]] = [
        (BPF_LD_W_ABS, None, None, SECCOMP_ARCH),
        (BPF_JEQ, None, "kill", nr["arch"]),
        (BPF_LD_W_ABS, None, None, SECCOMP_NR),
    ]
    if machine == "x86_64":
        code.append((BPF_JGE, "enosys", None, X32_SYSCALL_BIT))
    code += [
        (BPF_JEQ, "enosys", None, nr["clone3"]),
        (BPF_JEQ, "eperm", None, nr["keyctl"]),
        (BPF_JEQ, "eperm", None, nr["add_key"]),
        (BPF_JEQ, "eperm", None, nr["request_key"]),
        (BPF_JEQ, "flags", None, nr["unshare"]),
        (BPF_JEQ, "flags", None, nr["clone"]),
        (BPF_RET, None, None, SECCOMP_RET_ALLOW),
        "flags", (BPF_LD_W_ABS, None, None, SECCOMP_ARG0_LOW),
        (BPF_JSET, "eperm", None, CLONE_NEWUSER),
        (BPF_RET, None, None, SECCOMP_RET_ALLOW),
        "kill", (BPF_RET, None, None, SECCOMP_RET_KILL_PROCESS),
        "eperm", (BPF_RET, None, None, eperm),
        "enosys", (BPF_RET, None, None, enosys),
    ]
    labels: dict[str, int] = {}
    instructions: list[tuple[int, str | None, str | None, int]] = []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(instructions)
        else:
            instructions.append(item)

    def offset(label: str | None, here: int) -> int:  # counted from the next instruction
        return 0 if label is None else labels[label] - here - 1

    return [(op, offset(jt, here), offset(jf, here), k)
            for here, (op, jt, jf, k) in enumerate(instructions)]


def install_seccomp(machine: str) -> None:
    """The filter of `seccomp_program`, for this process and all it starts (no_new_privs is
    set, so no privilege is needed and nothing it execs can drop it)."""
    program = seccomp_program(machine)
    filters = (_SockFilter * len(program))(*(_SockFilter(*insn) for insn in program))
    fprog = _SockFprog(len(program), filters)
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
           "seccomp filter")


def own_session_keyring() -> None:
    """Leave the bot's session keyring for a new, empty, anonymous one. A kernel without
    keyrings (ENOSYS) has none to leak; any other failure stops the run (SKIP)."""
    number = SYSCALLS.get(platform.machine(), {}).get("keyctl")
    if number is None:
        raise OSError(errno.ENOSYS, f"no keyctl number for this machine ({platform.machine()})")
    if libc.syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        error = ctypes.get_errno()
        if error != errno.ENOSYS:
            raise OSError(error, "cannot leave the bot's session keyring "
                          f"(keyctl JOIN_SESSION_KEYRING: {os.strerror(error)})")


def become_reproducer(config: dict[str, Any]) -> None:
    """In the forked child: rlimits, no capabilities, the run's uid, a session keyring of its
    own, no new privileges, the seccomp filter, exec."""
    for name, value in config["rlimits"].items():
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))
    give_up_capabilities()
    uid = config["uid"]
    if uid is not None:
        os.setgroups(config.get("groups", []))  # only the GPU device groups, when asked
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    drop_capabilities()
    own_session_keyring()  # as the run's uid, so the new keyring is its own
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    install_seccomp(platform.machine())  # last: it refuses keyctl
    os.chdir(config["workdir"])
    argv = config["argv"]
    os.execve(argv[0], argv, dict(os.environ))


def inner(config: dict[str, Any], status_fd: int) -> int:
    os.set_inheritable(status_fd, False)
    # As the namespace's PID 1 with no handler, the kernel drops what the reproducer sends it
    # (a SIGINT made this process's KeyboardInterrupt the build's failure); the reproducer's
    # own Python sets its handler again at start.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        first_to_go()  # inherited by the reproducer and all it starts; /proc is writable yet
        limit_shared_memory(config["tmpfs_bytes"])
        build_view(config)
        loopback_up()
    except OSError as exc:
        print(f"torch-bisect-bot sandbox: setup failed: {exc}", file=sys.stderr, flush=True)
        return SETUP_FAILED
    child = os.fork()
    if child == 0:
        try:
            become_reproducer(config)
        except BaseException as exc:
            print(f"torch-bisect-bot sandbox: cannot start {config['argv'][0]}: {exc}",
                  file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    while True:  # as PID 1, reap orphans too, until the reproducer itself is done
        pid, status = os.wait()
        if pid == child:
            break
    os.write(status_fd, json.dumps({"wait_status": status}).encode())
    # Leaving PID 1 kills every process still left in the namespace.
    return os.waitstatus_to_exitcode(status) & 0xFF


def outer(config: dict[str, Any]) -> int:
    read_end, write_end = os.pipe()
    command = [*config["unshare"], sys.executable, "-I", "-S", os.path.abspath(__file__),
               "inner", json.dumps(config), str(write_end)]
    parent = os.getpid()

    def die_with_outer() -> None:
        # unshare's --kill-child takes the reproducer with it only when unshare dies: it must
        # die with this process, which dies with the bot (a SIGTERM or SIGHUP to the bot, a
        # closed terminal), or the reproducer runs on past its deadline.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the outer process died before prctl took hold
            os._exit(SETUP_FAILED)

    process = subprocess.Popen(command, pass_fds=(write_end,), preexec_fn=die_with_outer)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read()
    code = process.wait()
    if not report:  # never a verdict: "a broken sandbox never makes a build BAD"
        print(f"torch-bisect-bot sandbox: its first process ended ({code}) before the "
              "reproducer's status came, killed by the OOM killer or a signal: this build "
              "cannot be tested", file=sys.stderr, flush=True)
        return SETUP_FAILED
    status = json.loads(report)["wait_status"]
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # die like the child, without a core
        if number not in (signal.SIGKILL, signal.SIGSTOP):  # those keep their default
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return 128 + number
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    if sys.argv[1] == "outer":
        sys.exit(outer(json.loads(sys.argv[2])))
    sys.exit(inner(json.loads(sys.argv[2]), int(sys.argv[3])))
