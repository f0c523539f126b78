"""`bisect-bot demo`: build a local nightly mirror, serve it on 127.0.0.1, bisect the example."""

from __future__ import annotations

import argparse
import json
from importlib import resources
from pathlib import Path

from bot.demo.index_server import IndexServer
from bot.demo.mirror import build_mirror
from bot.jobs import local

EXAMPLE = "example_issue.md"  # an issue body written like a real PyTorch report


def example_path(out: Path, name: str = EXAMPLE) -> Path:
    """Copy a bundled example out of the package, so it can be read as a plain file."""
    target = out / name
    target.write_bytes(resources.files("bot.demo").joinpath("data").joinpath(name).read_bytes())
    return target


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("demo-output"),
                        help="folder for the mirror, the cache, the history (its resume "
                        "checkpoints) and the reports (default ./demo-output)")
    parser.add_argument("--workers", type=int, default=1, help="probes run side by side")


def demo_main(args: argparse.Namespace) -> int:
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    mirror = build_mirror(out / "mirror")
    issue = example_path(out)
    print(f"built a local nightly mirror of {len(mirror.versions)} builds in {mirror.root} "
          f"(regression planted in {mirror.first_bad})")
    with IndexServer(mirror.root) as server:
        parser = argparse.ArgumentParser()
        local.add_bisect_arguments(parser)
        bisect_args = parser.parse_args([
            str(issue), "--index", server.variant_url(mirror.variant), "--work-dir", str(out),
            "--cache-dir", str(out / "cache"), "--db", str(out / "history.sqlite3"),
            "--no-default-packages",
            "--workers", str(args.workers), "--timeout", "60",
            "--json", str(out / "report.json"), "--markdown", str(out / "report.md"),
            "--no-commit-tier",  # this mirror's nightlies have no git repository behind them
        ])
        print(f"serving it at {server.url}")
        code = local.bisect_main(bisect_args)
    found = json.loads((out / "report.json").read_text()).get("first_bad")
    print(f"\nfirst bad nightly: {found}")
    print("matches the planted regression" if found == mirror.first_bad
          else f"DOES NOT match the planted regression {mirror.first_bad}")
    return code if found == mirror.first_bad else 1
