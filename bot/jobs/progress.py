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
        # The bad end plus a binary search: what a bisection of n builds usually costs.
        self.expected = 1 + math.ceil(math.log2(max(2, total_builds - 1)))
        self.done = 0
        self.width = width
        self.numbers: dict[str, int] = {}  # a build's probe number, from its first event
        self.done_before = 0  # probes done by the runs this one resumes

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
