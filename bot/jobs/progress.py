"""Live progress on the terminal: which build, installing or running, probe i of about n."""

from __future__ import annotations

import math
import sys
from typing import Any, TextIO

from bot.core.results import ProbeRecord
from bot.core.safe_markdown import visible


class TerminalProgress:
    """Draws one status line on a terminal, or prints one line per event into a log."""

    def __init__(self, total_builds: int, width: int = 1, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr  # looked up now: stderr may have been redirected
        self.live = self.stream.isatty()
        self.expected = _expected(total_builds)
        self.done = 0
        self.width = width
        self.numbers: dict[str, int] = {}  # a build's probe number, from its first event
        self.done_before = 0  # probes done by the runs this one resumes
        self.label: str | None = None  # what a probe that is no search's says for its number

    def _number(self, version: str) -> int:
        """Probes running side by side each have their own number, kept from install to verdict;
        a resumed bisection's go on from those done before ("[probe 1/~6]" just after
        "resuming ...: 2 probes already done" read as starting over)."""
        return self.numbers.setdefault(version, self.done_before + len(self.numbers) + 1)

    def _line(self, text: str, final: bool = False) -> None:
        text = visible(text)  # reasons are the reproducer's words
        try:
            if self.live:
                self.stream.write("\r\033[K" + text + ("\n" if final else ""))
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
        except OSError:  # a terminal hung up (EIO), a closed pipe: the bisection goes on
            pass

    def __call__(self, event: str, **details: Any) -> None:
        build = details.get("build")
        if event in ("installing", "running") and build is not None:
            label = self.label
            if label is None:
                number = self._number(build.version)
                label = f"[probe {number}/~{max(self.expected, number)}]"
            attempt = details.get("attempt", 1)
            doing = "installing" if event == "installing" else "running" + (
                f" (run {attempt})" if attempt > 1 else "")
            self._line(f"{label} {build.version}: {doing}")
        elif event == "probed":
            record: ProbeRecord = details["record"]
            self.done += 1
            self._line(
                f"[probe {self._number(record.version)}] {record.version}: "
                f"{record.verdict.value.upper()} "
                f"({record.reason[:80]}; {record.install_seconds:.1f} s install, "
                f"{record.seconds:.1f} s run)",
                final=True,
            )
        elif event == "stopped" and build is not None:
            why = details.get("why") or "other verdicts made it moot"
            self._line(f"{build.version}: stopped, {why}", final=True)
        elif event == "message":
            self._line(str(details.get("text", "")), final=True)
        elif event == "case":
            # A sweep's run of a case on its nightly: one probe, not the first of a search,
            # so its lines name the case instead of "[probe 1/~6]".
            self.label = f"[{details['case']}]"
        elif event == "search":
            # That case's bisection: numbered from 1 (the nightly, its bad end, when its run
            # is taken in), of about what a window of its builds costs.
            self.label, self.numbers, self.done_before = None, {}, 0
            self.expected = _expected(int(details["builds"]))


def _expected(builds: int) -> int:
    """The bad end plus a binary search: what a bisection of `builds` builds usually costs."""
    return 1 + math.ceil(math.log2(max(2, builds - 1)))
