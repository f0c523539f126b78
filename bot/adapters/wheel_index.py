"""HTTP reads of package index pages and wheel metadata (PEP 503 HTML, PEP 691 JSON, PEP 658)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests

from bot.core.builds import WheelLink, parse_simple_html, parse_simple_json
from bot.core.errors import UserError

# PEP 691: ask for JSON first, accept HTML; the nightly index on download.pytorch.org serves HTML.
_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
)
_RETRY_STATUS = {429, 500, 502, 503, 504}
# What no second try mends: a URL requests cannot read (file://, a plain path, a typo).
_NOT_RETRIED = (requests.exceptions.InvalidSchema, requests.exceptions.MissingSchema,
                requests.exceptions.InvalidURL)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded by attempts and by total time."""

    attempts: int = 4
    base_s: float = 0.5
    cap_s: float = 8.0
    total_s: float = 60.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.cap_s, self.base_s * 2**attempt))


class WheelIndex:
    """Reads one index (e.g. https://download.pytorch.org/whl/nightly/cu130)."""

    def __init__(
        self,
        index_url: str,
        *,
        timeout_s: float = 30.0,
        retry: RetryPolicy = RetryPolicy(),
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if urlsplit(index_url).scheme not in ("http", "https"):
            # requests reads no file:// URL (or path): it was tried 4 times, with backoff,
            # before "InvalidSchema (after 4 attempts)".
            raise UserError(
                f"cannot read the index {index_url}: indexes are read over http(s) only; for a "
                "folder of wheels, put them in FOLDER/torch/, serve it with `python -m "
                "http.server --bind 127.0.0.1 --directory FOLDER 8000` and give "
                "http://127.0.0.1:8000/")
        self.index_url = index_url.rstrip("/") + "/"
        self.timeout_s = timeout_s
        self.retry = retry
        self.session = session or requests.Session()
        self.sleep = sleep

    def _get(self, url: str, accept: str, method: str = "GET") -> requests.Response:
        """The one method that touches the wire, with retries on transient failures."""
        started = time.monotonic()
        problem = "no attempt made"
        for attempt in range(self.retry.attempts):
            try:
                response = self.session.request(
                    method, url, headers={"Accept": accept}, timeout=self.timeout_s
                )
                if response.status_code not in _RETRY_STATUS:
                    return response
                problem = f"HTTP {response.status_code}"
            except _NOT_RETRIED as exc:
                raise UserError(f"cannot read the index: {exc}") from None  # names the URL
            except requests.RequestException as exc:
                problem = type(exc).__name__
            pause = self.retry.delay(attempt)
            if attempt + 1 == self.retry.attempts or (
                time.monotonic() - started + pause > self.retry.total_s
            ):
                break
            self.sleep(pause)
        raise UserError(f"cannot read {url}: {problem} (after {attempt + 1} attempts)")

    def project_links(self, project: str = "torch") -> list[WheelLink]:
        """The wheel links on a project's page."""
        url = f"{self.index_url}{project}/"
        response = self._get(url, _ACCEPT)
        if response.status_code == 404:
            raise UserError(f"the index has no page for {project!r}: {url}")
        if response.status_code != 200:
            raise UserError(f"cannot read {url}: HTTP {response.status_code}")
        kind = response.headers.get("Content-Type", "").split(";")[0].strip()
        if kind == "application/vnd.pypi.simple.v1+json":
            return parse_simple_json(response.text, response.url or url)
        return parse_simple_html(response.text, response.url or url)

    def core_metadata(self, link: WheelLink) -> str | None:
        """The wheel's METADATA without downloading the wheel (PEP 658), if the index has it."""
        if not link.has_metadata:
            return None
        response = self._get(link.url + ".metadata", "*/*")
        return response.text if response.status_code == 200 else None

    def present(self, links: Sequence[WheelLink], threads: int = 8) -> list[bool]:
        """Whether each file is there to download, asked with HEAD, several at once.

        A file the index does not list may still be on the server (the nightly index lists only
        the newest 60 versions). A missing one is 404, or 403 where the storage behind the CDN
        does not let anyone list it (S3's HeadObject answers 403 for a missing key to a reader
        without `s3:ListBucket`, per its API reference).
        """
        def one(link: WheelLink) -> bool:
            status = self._get(link.url, "*/*", method="HEAD").status_code
            if status in (403, 404, 410):
                return False
            if status != 200:
                raise UserError(f"cannot ask for {link.url}: HTTP {status}")
            return True

        if not links:
            return []
        with ThreadPoolExecutor(max_workers=min(threads, len(links))) as pool:
            return list(pool.map(one, links))
