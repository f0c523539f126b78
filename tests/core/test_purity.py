"""The core stays pure: no module under bot/core imports I/O, processes, clocks or the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "bot" / "core"
FORBIDDEN_MODULES = {
    "subprocess", "requests", "socket", "urllib.request", "http", "http.client", "time",
    "os", "shutil", "tempfile", "sqlite3", "github", "docker", "random", "threading",
    "pathlib", "io",
}
FORBIDDEN_NAMES = {("os", "environ"), ("datetime", "now"), ("date", "today")}


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_module_imports_nothing_impure(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = _imports(tree)
    bad = {name for name in imported if name.split(".")[0] in FORBIDDEN_MODULES or name in
           FORBIDDEN_MODULES}
    assert not bad, f"{path.name} imports {sorted(bad)}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            assert (node.value.id, node.attr) not in FORBIDDEN_NAMES, (
                f"{path.name} uses {node.value.id}.{node.attr}"
            )


def test_the_check_catches_an_impure_module(tmp_path: Path) -> None:
    tree = ast.parse("import subprocess\nfrom os import environ\n")
    assert {"subprocess", "os"} <= _imports(tree)
