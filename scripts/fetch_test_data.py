"""Fetch pinned npm packages that tests need (GitHub's OpenAPI description, webhook examples)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
WEBHOOKS_DIR = REPO_ROOT / "tests" / "data" / "webhooks"


@dataclass(frozen=True)
class Package:
    """One pinned npm package and the single file tests read from it."""

    name: str
    version: str
    integrity: str  # npm's sha512 of the tarball; `npm pack` reports it, we compare
    member: str  # path inside the tarball

    @property
    def dirname(self) -> str:
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}"


OPENAPI = Package(
    "@octokit/openapi",
    "23.0.2",
    "sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg==",
    "package/generated/api.github.com.json",
)
WEBHOOK_EXAMPLES = Package(
    "@octokit/webhooks-examples",
    "7.6.1",
    "sha512-De6U3XB6O3DtCa7bKgCMzTHdeopqqZ6SNivMYJnK65ierKL1AnNIA0tkRYCRS7lwGT792d+Ps1WbfHlso6MynQ==",
    "package/api.github.com/index.json",
)
# (event, action, how many examples) copied into tests/data/webhooks by --refresh-webhooks
WEBHOOK_PICKS = (("issues", "labeled", 1), ("issues", "edited", 1), ("issue_comment", "created", 1))


def cache_dir(environ: dict[str, str] | None = None) -> Path:
    """Where fetched data lives: $BISECT_BOT_TEST_DATA, else .cache/test-data/ in the repo."""
    env = os.environ if environ is None else environ
    override = env.get("BISECT_BOT_TEST_DATA")
    return Path(override) if override else REPO_ROOT / ".cache" / "test-data"


def package_file(package: Package, root: Path | None = None) -> Path:
    """The path the package's member file has once fetched (it may not exist yet)."""
    return (root or cache_dir()) / package.dirname / Path(package.member).name


def fetch(package: Package, root: Path | None = None) -> Path:
    """Download the package with `npm pack`, check its integrity, extract its one file."""
    target = package_file(package, root)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent.parent) as tmp:
        spec = f"{package.name}@{package.version}"
        result = subprocess.run(
            ["npm", "pack", spec, "--json", "--pack-destination", tmp],
            check=True, capture_output=True, text=True,
        )
        packed = json.loads(result.stdout)[0]
        if packed["integrity"] != package.integrity:
            raise RuntimeError(f"{spec}: integrity {packed['integrity']} is not the pinned one")
        with tarfile.open(Path(tmp) / packed["filename"]) as tar:
            source = tar.extractfile(package.member)
            if source is None:
                raise RuntimeError(f"{spec}: {package.member} is not a file")
            partial = Path(tmp) / "member.partial"
            with partial.open("wb") as out:
                shutil.copyfileobj(source, out)
        # rename only once complete, so an interrupted fetch never leaves a truncated file
        os.replace(partial, target)
    return target


def refresh_webhooks(examples_file: Path, out_dir: Path = WEBHOOKS_DIR) -> list[Path]:
    """Copy the picked real webhook examples into tests/data/webhooks, one file each."""
    events = {entry["name"]: entry for entry in json.loads(examples_file.read_text())}
    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for event, action, count in WEBHOOK_PICKS:
        picked = [ex for ex in events[event]["examples"] if ex.get("action") == action]
        for index, example in enumerate(picked[:count], start=1):
            path = out_dir / f"{event}.{action}.{index}.json"
            path.write_text(json.dumps(example, indent=2, sort_keys=True) + "\n")
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--refresh-webhooks", action="store_true",
                        help="also rewrite tests/data/webhooks/*.json from the examples package")
    args = parser.parse_args(argv)
    print(fetch(OPENAPI))
    examples = fetch(WEBHOOK_EXAMPLES)
    print(examples)
    if args.refresh_webhooks:
        for path in refresh_webhooks(examples):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
