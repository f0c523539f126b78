"""A package index on 127.0.0.1 that serves a mirror folder as PyTorch's nightly index does."""

from __future__ import annotations

import hashlib
import html
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from packaging.version import Version

from bot.demo.wheels import read_metadata

PREFIX = "/whl/nightly/"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def project_page_html(variant: str, wheels: list[Path], project: str = "torch",
                      yanked: Mapping[str, str] | None = None, hashes: bool = False) -> str:
    """The page layout of pytorch/test-infra s3_management/manage.py (to_simple_package_html);
    a file named in `yanked` carries PEP 592's `data-yanked` (its reason), and with `hashes`
    every link its `#sha256=`, as PyPI's pages have them."""
    yanked = yanked or {}
    out = ["<!DOCTYPE html>", "<html>", "  <body>", f"    <h1>Links for {project}</h1>"]
    for wheel in sorted(wheels):
        href = f"{PREFIX}{variant}/{quote(wheel.name)}"  # quote() writes `+` as %2B
        if hashes:
            href += f"#sha256={_sha256(wheel)}"
        meta = (' data-dist-info-metadata="true" data-core-metadata="true"'
                if wheel.name.endswith(".whl") else "")
        if wheel.name in yanked:
            meta += f' data-yanked="{html.escape(yanked[wheel.name])}"'
        out.append(f'    <a href="{href}"{meta}>{wheel.name}</a><br/>')
    out += ["  </body>", "</html>", f"<!--TIMESTAMP {int(time.time())}-->"]
    return "\n".join(out) + "\n"


def project_page_json(variant: str, wheels: list[Path], project: str = "torch",
                      yanked: Mapping[str, str] | None = None, hashes: bool = False) -> str:
    """PEP 691's page: a yanked file's `yanked` is its reason, or true when it has none."""
    yanked = yanked or {}
    files = [
        {"filename": w.name, "url": f"{PREFIX}{variant}/{quote(w.name)}",
         "hashes": {"sha256": _sha256(w)} if hashes else {},
         "core-metadata": w.name.endswith(".whl"),
         **({"yanked": yanked[w.name] or True} if w.name in yanked else {})}
        for w in sorted(wheels)
    ]
    return json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files})


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def normalized(name: str) -> str:
    """PEP 503's normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheels_of(folder: Path, project: str) -> list[Path]:
    """The files of one project in a folder (the nightly index also serves torch's
    dependencies: sympy, networkx, jinja2 and the rest): wheels, and source archives as
    PyPI serves them (`name-version.tar.gz`)."""
    wanted = normalized(project)
    files = [*folder.glob("*.whl"), *folder.glob("*.tar.gz")]
    return [w for w in files if normalized(w.name.split("-")[0]) == wanted]


@dataclass
class Fault:
    """A planned misbehaviour for tests: answer `status`, stall, or cut the body short."""

    path_contains: str
    status: int | None = None
    delay_s: float = 0.0
    truncate_to: int | None = None
    times: int = 1


@dataclass
class IndexServer:
    """Serves `root/<variant>/*.whl` under /whl/nightly/<variant>/ on an ephemeral port."""

    root: Path
    faults: list[Fault] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    ranges: bool = True  # answer `Range` requests for wheels (False: a server that does not)
    # (file name, Range header) of each range answered, in order
    ranges_asked: list[tuple[str, str]] = field(default_factory=list)
    not_modified: list[str] = field(default_factory=list)  # file names answered 304
    range_sizes: bool = True  # False: a 206 says `bytes A-B/*`, the whole size unknown
    rate_bytes_s: float = 0.0  # each file sent at most this fast (0: as fast as it goes)
    # A project page lists only its newest `listed` versions, as the nightly index keeps its
    # newest 60 (about two months); the older files can still be fetched by their URL.
    listed: int | None = None
    yanked: dict[str, str] = field(default_factory=dict)  # file name -> reason (PEP 592)
    hashes: bool = False  # links carry their sha256, as PyPI's do (the nightly index's do not)
    port: int = 0  # 0: an ephemeral one; a fixed one lets a stopped server come back at its URL
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the server is not started"
        host, port = self._server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}{PREFIX}"

    def variant_url(self, variant: str) -> str:
        return f"{self.url}{variant}/"

    def start(self) -> IndexServer:
        handler = _make_handler(self)
        self._server = _QuietServer(("127.0.0.1", self.port), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> IndexServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def take_fault(self, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.path_contains in path and fault.times > 0:
                fault.times -= 1
                return fault
        return None


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-download (a prefetch called off) is not an error here.

    The listen backlog is socketserver's default of 5 otherwise. uv opens a connection for
    each of the ~7 index pages it needs at once, so three installs starting together (a round
    of three workers) overflowed it: the kernel dropped the extra SYNs and those clients
    retried after the 1 s initial retransmission timeout, which put a second on some installs
    (1.02 s against 0.04 s for uv to resolve torch's dependencies). An index on the internet
    does not drop connections that way, so neither does this stand-in for one.
    """

    request_queue_size = 128

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


def _make_handler(server: IndexServer) -> Callable[..., BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return None

        head_only = False  # per request: a connection kept alive may ask HEAD, then GET

        def do_HEAD(self) -> None:
            """What a GET would answer, without the body (the CDN answers HEAD for a file)."""
            self._answer(head_only=True)

        def do_GET(self) -> None:
            self._answer(head_only=False)

        def _answer(self, head_only: bool) -> None:
            self.head_only = head_only
            path = unquote(urlsplit(self.path).path)
            server.requests.append(path)
            fault = server.take_fault(path)
            if fault and fault.delay_s:
                time.sleep(fault.delay_s)
            if server._server is None:  # stopped meanwhile: a host gone answers nothing
                self.close_connection = True
                return
            if fault and fault.status:
                return self._send(fault.status, b"injected fault", "text/plain")
            status, found, kind = _route(server, path, self.headers.get("Accept", ""))
            cut = fault.truncate_to if fault else None
            if isinstance(found, Path):
                return self._send_file(found, kind, cut)
            self._send(status, found, kind, cut=cut)

        def _send_file(self, path: Path, kind: str, cut: int | None) -> None:
            """A file, or the one range of it asked for (`Range: bytes=A-B`, as the CDN in
            front of download.pytorch.org answers one); anything else gets the whole file.

            Like that CDN (S3 behind CloudFront) it names each file's version with `ETag` and
            `Last-Modified`, and answers a request that names the version it has with 304 Not
            Modified. Without them uv took every download it had cached for stale: a uv that
            had waited on another's download of the same wheel fetched it again, so installs
            started together fetched each dependency once apiece."""
            stat = path.stat()
            size = stat.st_size
            validators = {"ETag": f'"{size:x}-{stat.st_mtime_ns:x}"',
                          "Last-Modified": formatdate(stat.st_mtime, usegmt=True)}
            if _unchanged(self.headers, validators["ETag"], stat.st_mtime):
                server.not_modified.append(path.name)
                return self._send(304, b"", kind, headers=validators)
            start, end = 0, size
            asked = _one_range(self.headers.get("Range", ""), size) if server.ranges else None
            if asked is not None:
                server.ranges_asked.append((path.name, self.headers["Range"]))
                start, end = asked
            with path.open("rb") as source:
                source.seek(start)
                body = source.read(end - start)
            headers = {**validators, **({"Accept-Ranges": "bytes"} if server.ranges else {})}
            if asked is not None:
                whole = size if server.range_sizes else "*"
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{whole}"
            self._send(206 if asked is not None else 200, body, kind, cut, headers,
                       rate=server.rate_bytes_s)

        def _send(self, status: int, body: bytes, kind: str, cut: int | None = None,
                  headers: dict[str, str] | None = None, rate: float = 0.0) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            body = body if cut is None else body[:cut]
            if self.head_only:
                return
            if not rate:
                self.wfile.write(body)
            else:  # one connection's share of a CDN's bandwidth, for the download benchmark
                started = time.monotonic()
                step = max(1, min(1 << 16, int(rate / 20)))  # about 20 writes a second
                for offset in range(0, len(body), step):
                    early = offset / rate - (time.monotonic() - started)
                    if early > 0:
                        time.sleep(early)
                    self.wfile.write(body[offset:offset + step])
            if cut is not None:
                self.close_connection = True

    return Handler


def _unchanged(headers: Message, etag: str, mtime: float) -> bool:
    """Whether a conditional request names the file's current version (RFC 9110 13.1):
    `If-None-Match` decides when present, else `If-Modified-Since`."""
    if headers.get("If-None-Match") is not None:
        return etag in (tag.strip() for tag in headers["If-None-Match"].split(","))
    since = headers.get("If-Modified-Since")
    try:
        return since is not None and int(mtime) <= parsedate_to_datetime(since).timestamp()
    except (TypeError, ValueError):
        return False


def _one_range(header: str, size: int) -> tuple[int, int] | None:
    """`bytes=A-B` or `bytes=A-` as (start, end) with end exclusive; None for no header, for
    several ranges, or for one that does not fit the file (then the whole file is sent)."""
    match = re.fullmatch(r"bytes=(\d+)-(\d*)", header.strip())
    if match is None:
        return None
    start = int(match[1])
    end = min(size, int(match[2]) + 1) if match[2] else size
    return (start, end) if start < end else None


def _newest(wheels: list[Path], count: int | None) -> list[Path]:
    """The wheels of the newest `count` versions (all when count is None)."""
    if count is None:
        return wheels
    versions = sorted({_version(w) for w in wheels})[-count:]
    return [w for w in wheels if _version(w) in versions]


def _version(dist: Path) -> Version:
    return Version(dist.name.removesuffix(".tar.gz").split("-")[1])


def _route(server: IndexServer, path: str, accept: str) -> tuple[int, bytes | Path, str]:
    root = server.root
    if not path.startswith(PREFIX):
        return 404, b"not found", "text/plain"
    parts = [p for p in path[len(PREFIX):].split("/") if p]
    if not parts or ".." in parts or not (root / parts[0]).is_dir():
        return 404, b"not found", "text/plain"
    folder = root / parts[0]
    if len(parts) == 2 and not parts[1].endswith((".whl", ".metadata", ".tar.gz")):
        wheels = _newest(wheels_of(folder, parts[1]), server.listed)
        if not wheels:
            return 404, b"not found", "text/plain"
        project = normalized(parts[1])
        if JSON_TYPE in accept:
            return 200, project_page_json(parts[0], wheels, project, server.yanked,
                                          server.hashes).encode(), JSON_TYPE
        return 200, project_page_html(parts[0], wheels, project, server.yanked,
                                      server.hashes).encode(), "text/html"
    if len(parts) == 2 and parts[1].endswith(".whl.metadata"):
        wheel = folder / parts[1][: -len(".metadata")]
        if wheel.is_file():
            return 200, read_metadata(wheel), "application/octet-stream"
    if len(parts) == 2 and (folder / parts[1]).is_file():
        return 200, folder / parts[1], "application/octet-stream"
    return 404, b"not found", "text/plain"
