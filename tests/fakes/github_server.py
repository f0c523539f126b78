"""A local HTTP server speaking GitHub's REST subset, checking each request against the spec."""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.github_json import Renderer
from tests.fakes.github_routes import ROUTES, Call, Invalid, NotFound, Reply
from tests.fakes.github_state import GitHubState
from tests.fakes.openapi_spec import NO_BODY, OpenApiSpec

DOCS = "https://docs.github.com/rest"


@dataclass(frozen=True)
class Rejection:
    """A request GitHub's description does not allow (or the fake cannot answer)."""

    method: str
    path: str
    status: int
    problems: tuple[str, ...]


@dataclass
class Fault:
    """A forced response, served instead of the real one to the first request it matches."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    method: str | None = None
    path: str | None = None  # a regular expression searched in the request path

    def matches(self, method: str, path: str) -> bool:
        return (self.method in (None, method)) and (self.path is None or bool(
            re.search(self.path, path)))


SECONDARY_RATE_LIMIT = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)


class FakeGitHub:
    """The server; `state` holds its data, `rejected` every request that broke the spec."""

    def __init__(self, spec: OpenApiSpec, token: str | None = None, prefix: str = "") -> None:
        """`prefix` serves the API below a path, as GitHub Enterprise Server does (`/api/v3`)."""
        self.spec = spec
        self.prefix = prefix
        self.token = token
        self.state = GitHubState()
        self.rejected: list[Rejection] = []
        self.response_problems: list[str] = []  # the fake's own answers that break the spec
        self.faults: deque[Fault] = deque()
        self.served_faults: list[Fault] = []
        self.log: list[str] = []  # "METHOD /path?query", for debugging a failing test
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}{prefix}"
        self.render = Renderer(self.url)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def inject(self, status: int, body: Any = None, headers: dict[str, str] | None = None,
               method: str | None = None, path: str | None = None) -> None:
        """Queue a forced response for the next request matching `method` and `path`."""
        self.faults.append(Fault(status, body, headers or {}, method, path))

    def inject_secondary_rate_limit(self, retry_after: int = 1, **match: str) -> None:
        """Queue the 403 GitHub sends when a client creates content too fast."""
        body = {"message": SECONDARY_RATE_LIMIT, "documentation_url": DOCS}
        self.inject(403, body, {"Retry-After": str(retry_after)}, **match)

    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> Reply:
        """Answer one request: authenticate, check it against the spec, then fault or route."""
        self.log.append(f"{method} {target}")
        split = urlsplit(target)
        if not split.path.startswith(self.prefix):
            return self._reject(method, split.path, 404, [f"outside {self.prefix}"])
        split = split._replace(path=split.path[len(self.prefix):])
        query = parse_qs(split.query, keep_blank_values=True)
        if self.token and headers.get("authorization") not in (
            f"Bearer {self.token}", f"token {self.token}"
        ):
            return Reply(401, {"message": "Bad credentials", "documentation_url": DOCS})
        try:
            body = json.loads(raw) if raw else NO_BODY
        except ValueError:
            return self._reject(method, split.path, 400, ["body is not JSON"])
        checked = self.spec.check(method, split.path, query, body)
        if checked.operation is None:
            return self._reject(method, split.path, 404, checked.problems)
        if checked.problems:
            return self._reject(method, split.path, 422, checked.problems)
        with self._lock:
            fault = next((f for f in self.faults if f.matches(method, split.path)), None)
            if fault is not None:
                self.faults.remove(fault)
                self.served_faults.append(fault)
                return Reply(fault.status, fault.body, fault.headers)
            operation_id = checked.operation.operation_id
            if operation_id not in ROUTES:
                problem = f"{operation_id} is documented but the fake does not implement it"
                return self._reject(method, split.path, 501, [problem])
            single = {name: values[-1] for name, values in query.items()}
            call = Call(self.state, self.render, split.path, checked.path_params, single,
                        None if body is NO_BODY else body)
            reply = _answer(call, ROUTES[operation_id])
            for problem in self.spec.check_response(checked.operation, reply.status, reply.body):
                self.response_problems.append(f"{method} {split.path}: {problem}")
            return reply

    def _reject(self, method: str, path: str, status: int, problems: list[str]) -> Reply:
        self.rejected.append(Rejection(method, path, status, tuple(problems)))
        return Reply(status, {"message": "; ".join(problems), "documentation_url": DOCS})


def _answer(call: Call, route: Any) -> Reply:
    try:
        return route(call)  # type: ignore[no-any-return]
    except NotFound:
        return Reply(404, {"message": "Not Found", "documentation_url": DOCS})
    except Invalid:
        return Reply(422, {"message": "Validation Failed", "documentation_url": DOCS})


def _handler_for(server: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as requests' connection pool expects

        def _serve(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = server.handle(self.command, self.path, headers, raw)
            data = b"" if reply.body is None else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if data:
                self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass  # tests inspect `server.rejected`, not a log

    return Handler
