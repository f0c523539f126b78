"""The documentation against the code: the commands, flags, files, tests, workflow inputs and
config keys that the docs name exist, as a newcomer following them would find out."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import fields
from functools import cache
from pathlib import Path

import yaml

from bot.core.config import ROLES, Config, Labels, parse_config
from bot.jobs.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PROSE = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "workflows" / "README.md"]
# Where a command line is written for someone to run: prose, examples, Make recipes, the
# workflows' `run:` steps and the scripts (which start the CLI as `python -m bot.jobs.cli`).
COMMAND_FILES = [*PROSE, *sorted((ROOT / "examples").iterdir()), ROOT / "Makefile",
                 *sorted((ROOT / "workflows").glob("*.yml")),
                 *sorted((ROOT / ".github" / "workflows").glob("*.yml")),
                 *sorted((ROOT / "scripts").glob("*.sh"))]
# `bisect-bot WORD ...` up to the end of the line or of its code span; `torch-bisect-bot` and
# `@torch-bisect-bot` are the bot's name, and `bisect-bot's`, `bisect-bot:` no command line.
_COMMAND = re.compile(r"(?<![\w-])(?:bisect-bot|-m bot\.jobs\.cli)((?: +[^\s`|;&)]+)*)")
_FLAG = re.compile(r"^\[?(--[a-z][a-z0-9-]*)")
_ANY_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# Other programs' flags that the prose names on their own, each with its program.
OTHER_TOOLS_FLAGS = {
    "--size": "a reproducer's own argument in the examples (repro.py --size 8)",
    "--filter": "git clone", "--single-branch": "git clone", "--shallow-since": "git fetch",
    "--first-parent": "git rev-list", "--cpus": "docker run",
    "--default-index": "uv pip install", "--no-build": "uv pip install",
    "--kill-child": "unshare", "--user": "unshare", "--map-root-user": "unshare",
}
# PyTorch's own files, which the commit tier sorts commits by.
PYTORCH_PATHS = {".ci/docker/", ".ci/manywheel/", ".github/scripts/generate_binary_build_matrix.py"}
# A code span that is another program's command line: its flags are that program's.
_OTHER_COMMAND = re.compile(r"^(?:torchrun|python3? -m (?:venv|pip|torch)|python3? (?!\S*"
                            r"benchmarks/)|pip|uv|git|unshare|docker|helm|mypy|jq|gh|sudo)\b")


def _options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], set[str]]]:
    """Each command path (`("round", "plan")`) with its option strings."""
    options: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        else:
            options.update(action.option_strings)
    yield path, options


COMMANDS = dict(_options(build_parser()))
ALL_OPTIONS = set().union(*COMMANDS.values())


def _command_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line, words after `bisect-bot`) of every command line in a file; `\\`-continued lines
    are one line, and a Makefile's only commands are its recipes (tab-indented)."""
    text = path.read_text(encoding="utf-8")
    if path.name == "Makefile":
        text = "\n".join(line if line.startswith("\t") else "" for line in text.splitlines())
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        start, line = number + 1, lines[number]
        while line.endswith("\\") and number + 1 < len(lines):
            number += 1
            line = line[:-1] + " " + lines[number].strip()
        number += 1
        for found in _COMMAND.finditer(line):
            words = found.group(1).split()
            cut = next((i for i, word in enumerate(words) if word.startswith("#")), len(words))
            if words:
                yield start, words[:cut]


def _command(words: list[str]) -> tuple[tuple[str, ...], list[str]] | None:
    """The command path the words name and the words after it; None for an unknown one."""
    path: tuple[str, ...] = ()
    for word in words:
        if (*path, word) not in COMMANDS:
            break
        path = (*path, word)
    if not path or any(len(key) > len(path) and key[:len(path)] == path for key in COMMANDS):
        return None  # no command, or a group without its subcommand (`round`, `suite`)
    return path, words[len(path):]


def _documented_commands() -> Iterator[tuple[str, list[str]]]:
    for path in COMMAND_FILES:
        for line, words in _command_lines(path):
            yield f"{path.relative_to(ROOT)}:{line}", words


def test_every_documented_command_line_names_a_command_and_its_own_flags():
    """Every `bisect-bot <command> [--flag ...]` the docs, examples, Make recipes, workflow
    steps and scripts write is a command of the real parser, with flags it takes."""
    problems, seen = [], 0
    for where, words in _documented_commands():
        named = _command(words)
        if named is None:
            problems.append(f"{where}: `bisect-bot {' '.join(words[:2])}` is no command")
            continue
        seen += 1
        path, rest = named
        flags = [found.group(1) for word in rest if (found := _FLAG.match(word))]
        problems += [f"{where}: `bisect-bot {' '.join(path)}` has no {flag}"
                     for flag in flags if flag not in COMMANDS[path]]
    assert seen > 50, seen  # the scan still finds the commands
    assert not problems, "\n".join(problems)


@cache
def _benchmark_flags(script: str) -> set[str]:
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{script[:-3]}", "--help"],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    return set(_ANY_FLAG.findall(done.stdout))


def test_every_flag_the_prose_names_is_one_the_bot_or_its_benchmark_takes():
    """A flag named on its own in the prose (`--on-timeout`, `--configs bc`) exists: in some
    `bisect-bot` command, or in the benchmark the span names (or any benchmark, for one named
    without its script), unless it is another program's, named as such."""
    benchmarks = [path.name for path in (ROOT / "benchmarks").glob("*.py")
                  if "__main__" in path.read_text(encoding="utf-8")]
    any_benchmark = set().union(*map(_benchmark_flags, benchmarks))
    problems = []
    for path in PROSE:
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
        for span in re.findall(r"`([^`\n]+)`", text):
            flags = _ANY_FLAG.findall(span)
            if not flags or "bisect-bot" in span or _OTHER_COMMAND.match(span):
                continue  # whole command lines are the test above's
            script = re.search(r"benchmarks/(\w+\.py)", span)
            known = (_benchmark_flags(script.group(1)) if script else
                     ALL_OPTIONS | any_benchmark | OTHER_TOOLS_FLAGS.keys())
            problems += [f"{path.relative_to(ROOT)}: `{span}`: {flag}"
                         for flag in flags if flag not in known]
    assert not problems, "\n".join(problems)


def _named_paths(path: Path) -> Iterator[tuple[str, Path]]:
    """The repository files a doc names: its relative links, and code spans that start with
    one of the repository's own folders or are one of its top-level files."""
    text = path.read_text(encoding="utf-8")
    for link in re.findall(r"\]\(([^)#\s]+)", text):
        if not re.match(r"[a-z]+:", link):
            yield link, path.parent / link
    own = "|".join(re.escape(name) for name in (
        "bot/", "tests/", "docs/", "benchmarks/", "scripts/", "examples/", "workflows/",
        "repro_suites/", ".github/", ".ci/", "Makefile", "Dockerfile", "pyproject.toml"))
    for span in re.findall(r"`([^`\s]+)`", text):
        name = span.split("::")[0].rstrip(".,:;")
        if re.match(own, name) and not re.search(r"[<{$]", name) and name not in PYTORCH_PATHS:
            yield span, ROOT / name


def test_every_file_and_test_the_docs_name_exists():
    """`docs/security.md`, `.github/torch-bisect-bot.yml`, `tests/faults/test_resume.py::
    test_a_killed_bisection_resumes_without_rerunning_probes`: each is there."""
    problems = []
    for doc in PROSE:
        for named, target in _named_paths(doc):
            if not (list(ROOT.glob(str(target.relative_to(ROOT)))) if "*" in named
                    else target.exists()):
                problems.append(f"{doc.relative_to(ROOT)}: {named} does not exist")
        tests = "\n".join(path.read_text(encoding="utf-8") for path in
                          (ROOT / "tests").rglob("*.py"))
        for name in re.findall(r"::(test_\w+)", doc.read_text(encoding="utf-8")):
            if not re.search(rf"def {name}\b", tests):
                problems.append(f"{doc.relative_to(ROOT)}: no test is called {name}")
    assert not problems, "\n".join(problems)


def test_every_input_of_the_reusable_workflow_is_documented():
    """workflows/README.md is where an installer learns the inputs; `index-url` (a mirror of
    the nightly index) was not there. An input kept only for old callers says it is not read."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "bisect.yml").read_text())
    inputs = workflow[True]["workflow_call"]["inputs"]
    readme = (ROOT / "workflows" / "README.md").read_text(encoding="utf-8")
    missing = [name for name, spec in inputs.items()
               if not re.search(rf"(?<![\w-]){name}(?![\w-])", readme)
               and not spec["description"].startswith("Not read")]
    assert not missing, missing


def test_the_example_config_is_every_key_at_its_default():
    """The README points to `.github/torch-bisect-bot.yml` as the example whose keys are the
    defaults; its comment on `min_permission` names every role the parser takes."""
    text = (ROOT / ".github" / "torch-bisect-bot.yml").read_text(encoding="utf-8")
    assert parse_config(text) == Config()
    data = yaml.safe_load(text)
    assert set(data) == {field.name for field in fields(Config)}
    assert set(data["labels"]) == {field.name for field in fields(Labels)}
    comment = next(line for line in text.splitlines() if line.startswith("min_permission:"))
    assert set(re.findall(r"\b[a-z]+\b", comment.split("#", 1)[1])) >= set(ROLES[1:]), comment
