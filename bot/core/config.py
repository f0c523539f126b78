"""`.github/torch-bisect-bot.yml` -> a frozen Config; every key has a default; unknown keys fail."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import yaml

from bot.core.builds import VARIANT
from bot.core.errors import UserError

CONFIG_PATH = ".github/torch-bisect-bot.yml"  # the convention GitHub bots follow
# Repository roles, weakest first, as the collaborator-permission API names them (`role_name`).
ROLES = ("none", "read", "triage", "write", "maintain", "admin")
_PYTHON = re.compile(r"3\.[0-9]{1,2}")


@dataclass(frozen=True)
class Labels:
    """Issue labels: the one that triggers a bisection, and one per state of the sticky comment."""

    trigger: str = "bisect"
    queued: str = "bisect: queued"
    running: str = "bisect: running"
    found: str = "bisect: found"
    not_reproduced: str = "bisect: not-reproduced"
    not_a_regression: str = "bisect: not-a-regression"
    cannot_test: str = "bisect: cannot-test"
    failed: str = "bisect: failed"


# Where what a reproducer imports comes from by default, when torch's index lacks it.
PYPI_INDEX = "https://pypi.org/simple"


@dataclass(frozen=True)
class Config:
    """How the bot behaves in one repository."""

    handle: str = "torch-bisect-bot"
    labels: Labels = field(default_factory=Labels)
    variant: str = "cu130"
    python: str = "3.12"
    timeout: int = 600  # seconds one run of the reproducer may take
    index_url: str = "https://download.pytorch.org/whl/nightly/{variant}"
    # Where the packages a reproducer imports come from when torch's index lacks them
    # (wheels only, in environments of their own); "" keeps to torch's index.
    packages_index: str = PYPI_INDEX
    min_permission: str = "triage"  # who may trigger by comment: this role or a stronger one

    def index_for(self, variant: str) -> str:
        return self.index_url.replace("{variant}", variant)


def parse_config(source: str | Mapping[str, Any] | None, where: str = CONFIG_PATH,
                 notes: list[str] | None = None) -> Config:
    """A Config from YAML text or an already loaded mapping; None or empty text is all defaults.
    Keys of earlier versions that nothing reads any more are left out, with a line in
    `notes` saying where their setting is now (a config copied from an older example must
    not stop every bisection)."""
    data: Any = source
    if isinstance(source, str):
        try:
            data = yaml.safe_load(source)
        except yaml.YAMLError as error:
            raise UserError(f"{where}: not valid YAML ({error})") from None
    if data is None:
        return Config()
    if not isinstance(data, Mapping):
        raise UserError(f"{where}: expected a mapping of keys to values at the top")
    data = {key: value for key, value in data.items() if not _retired(key, where, notes)}
    values = _known(data, Config, where)
    if "labels" in values:
        values["labels"] = _labels(values["labels"], where)
    for key, check in _CHECKS.items():
        if key in values:
            values[key] = check(values[key], f"{where}: `{key}`")
    return Config(**values)


# Keys of earlier versions, with where their setting is now.
_RETIRED = {
    "runner_labels": "the GPU runners are the workflow's `gpu-runner` and `multi-gpu-runner` "
                     "inputs (workflows/torch-bisect-bot.yml)",
}


def _retired(key: object, where: str, notes: list[str] | None) -> bool:
    if key not in _RETIRED:
        return False
    if notes is not None:
        notes.append(f"{where}: `{key}` is no longer read: {_RETIRED[str(key)]}")
    return True


def _known(data: Mapping[str, Any], kind: type, where: str) -> dict[str, Any]:
    names = [f.name for f in fields(kind)]
    for key in data:
        if key not in names:
            raise UserError(f"{where}: unknown key `{key}` (known keys: {', '.join(names)})")
    return dict(data)


def _labels(value: Any, where: str) -> Labels:
    if not isinstance(value, Mapping):
        raise UserError(f"{where}: `labels` must map states to label names")
    values = _known(value, Labels, f"{where}: labels")
    for key, name in values.items():
        values[key] = _text(name, f"{where}: `labels.{key}`")
    labels = Labels(**values)
    names = [getattr(labels, f.name).lower() for f in fields(Labels)]
    if len(set(names)) != len(names):
        raise UserError(f"{where}: `labels` must name a different label for each state")
    return labels


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 50:
        raise UserError(f"{what}: expected a non-empty string of at most 50 characters")
    return value.strip()


def _handle(value: Any, what: str) -> str:
    handle = _text(value, what).lstrip("@")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*(\[bot\])?", handle):
        raise UserError(f"{what}: `{handle}` is not a GitHub login")
    return handle.removesuffix("[bot]")


def _variant(value: Any, what: str) -> str:
    if not isinstance(value, str) or not VARIANT.fullmatch(value):
        raise UserError(f"{what}: a variant is cpu, cuNNN (cu130), rocmX.Y (rocm6.4) or xpu")
    return value


def _python(value: Any, what: str) -> str:
    # YAML reads 3.10 as the float 3.1: only a quoted string says what was meant.
    if not isinstance(value, str) or not _PYTHON.fullmatch(value):
        raise UserError(f'{what}: give a quoted Python version X.Y, e.g. "3.12"')
    return value


def _timeout(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 7200:
        raise UserError(f"{what}: a whole number of seconds from 1 to 7200")
    return value


def _index_url(value: Any, what: str) -> str:
    if not isinstance(value, str) or not re.match(r"https?://\S+$", value) or len(value) > 500:
        raise UserError(f"{what}: an http(s) URL, `{{variant}}` standing for the variant")
    return value


def _packages_index(value: Any, what: str) -> str:
    if value == "":
        return ""
    if not isinstance(value, str) or not re.match(r"https?://\S+$", value) or len(value) > 500:
        raise UserError(f"{what}: an http(s) URL of a package index, or \"\" for torch's index "
                        "alone")
    return value


def _permission(value: Any, what: str) -> str:
    if value not in ROLES[1:]:
        raise UserError(f"{what}: one of {', '.join(ROLES[1:])}")
    return str(value)


_CHECKS = {
    "handle": _handle, "variant": _variant, "python": _python, "timeout": _timeout,
    "index_url": _index_url, "packages_index": _packages_index, "min_permission": _permission,
}
