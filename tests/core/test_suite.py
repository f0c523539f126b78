"""Table tests of the `# /// bisect-case` parser, shards and sweep transitions."""

from __future__ import annotations

import ast
import hashlib
import json
import re
from pathlib import Path

import pytest

from bot.core import suite
from bot.core.config import PYPI_INDEX
from bot.core.errors import UserError
from bot.core.suite import (
    Case,
    CaseMeta,
    Expect,
    Requires,
    Transition,
    issue_number,
    parse_meta,
    parse_shard,
    shard,
    transition,
)
from bot.core.verdicts import Verdict


def script(*meta: str, before: str = "# a reproducer\n", after: str = "import torch\n") -> str:
    lines = ["# /// bisect-case", *(f"# {m}" if m else "#" for m in meta), "# ///"]
    return before + "\n".join(lines) + "\n" + after


def test_defaults_when_the_block_is_empty() -> None:
    assert parse_meta(script(), "c.py") == CaseMeta()


def test_every_key() -> None:
    text = script('requires = "cuda"', 'expect = "fail"', "timeout = 90", "repeat = 3",
                  'match = "RuntimeError: .*"', 'metric = "max_abs_diff"', "threshold = 0.5",
                  'tags = ["bf16", "backward"]', "", "issue = 123")
    assert parse_meta(text, "c.py") == CaseMeta(
        requires=Requires.CUDA, expect=Expect.FAIL, timeout=90.0, repeat=3,
        match="RuntimeError: .*", metric="max_abs_diff", threshold=0.5,
        tags=("bf16", "backward"), issue=123)


@pytest.mark.parametrize(("value", "expected"), [
    ("42", 42), ('"#42"', 42), ('"https://github.com/pytorch/pytorch/issues/7"',
                                "https://github.com/pytorch/pytorch/issues/7"),
])
def test_issue_forms(value: str, expected: object) -> None:
    assert parse_meta(script(f"issue = {value}"), "c.py").issue == expected


# (metadata lines, the line the error names in the file, words of the message)
ERRORS = [
    (['colour = "red"'], 3, "unknown key 'colour'"),
    (['requires = "cpu"', 'requires_gpu = true'], 4, "unknown key 'requires_gpu'"),
    (['requires = "tpu"'], 3, "requires must be one of cpu, cuda"),
    (['expect = "crash"'], 3, "expect must be one of pass, fail"),
    (["timeout = 0"], 3, "timeout must be a number of seconds, at least 1"),
    (['timeout = "ten"'], 3, "timeout must be a number of seconds, at least 1"),
    (["timeout = inf"], 3, "timeout must be a number of seconds, at least 1"),
    (["timeout = 1e-9"], 3, "timeout must be a number of seconds, at least 1"),
    (['hang = "ignore"'], 3, "hang must be one of bad, skip"),
    (["repeat = 1.5"], 3, "repeat must be an integer"),
    (["repeat = true"], 3, "repeat must be an integer"),
    (['match = "("'], 3, "match is not a valid regular expression"),
    (['metric = "max diff"', "threshold = 1"], 3, "metric must be a name"),
    (['metric = "m"'], 2, "metric and threshold go together"),
    (['metric = "m"', "threshold = nan"], 4, "threshold must be a finite number"),
    (['tags = "bf16"'], 3, "tags must be a list"),
    (["issue = -1"], 3, "issue must be an issue number"),
    (['issue = "https://example.com/1"'], 3, "issue must be an issue number"),
    (['requires = "cpu"', "timeout = = 3"], 4, "invalid TOML"),
]


@pytest.mark.parametrize(("meta", "line", "words"), ERRORS)
def test_errors_name_the_file_and_line(meta: list[str], line: int, words: str) -> None:
    with pytest.raises(UserError) as error:
        parse_meta(script(*meta), "suite/case.py")
    assert str(error.value).startswith(f"suite/case.py:{line}: ")
    assert words in str(error.value)


@pytest.mark.parametrize(("text", "line", "words"), [
    ("import torch\n", 1, "no `# /// bisect-case` metadata block"),
    ("# /// script\n# x = 1\n# ///\n", 1, "no `# /// bisect-case`"),
    ("# /// bisect-case\n# timeout = 5\nimport torch\n", 3, "must start with `# `"),
    ("# /// bisect-case\n# timeout = 5\n", 1, "never closed"),
    (script() + script(before=""), 5, "a second `# /// bisect-case` block"),
])
def test_block_errors(text: str, line: int, words: str) -> None:
    with pytest.raises(UserError, match=f"^c.py:{line}: .*{words}"):
        parse_meta(text, "c.py")


def test_options_hash_changes_with_what_changes_results_only() -> None:
    base = CaseMeta()
    assert base.options_hash("3.12") == CaseMeta(tags=("x",), issue=5).options_hash("3.12")
    assert base.options_hash("3.12") != CaseMeta(repeat=2).options_hash("3.12")
    assert base.options_hash("3.12") != base.options_hash("3.11")
    assert base.options_hash("3.12") != CaseMeta(hang=Verdict.SKIP).options_hash("3.12")
    # the sweep's options that change what a run sees; their defaults keep the old hash
    assert base.options_hash("3.12") == base.options_hash(
        "3.12", sandbox="namespace", default_packages=True, packages_index=PYPI_INDEX)
    others = {base.options_hash("3.12", sandbox="none"),
              base.options_hash("3.12", sandbox="docker"),
              base.options_hash("3.12", default_packages=False),
              base.options_hash("3.12", packages_index=""),
              base.options_hash("3.12", packages_index="https://mirror.example/simple")}
    assert len(others) == 5 and base.options_hash("3.12") not in others
    assert parse_meta(script('hang = "skip"'), "c.py").hang is Verdict.SKIP
    assert parse_meta(script(), "c.py").hang is Verdict.BAD


def test_issue_number_only_for_the_sweeps_repository() -> None:
    url = "https://github.com/Owner/Repo/issues/12"
    assert issue_number(url, "owner/repo") == 12
    assert issue_number(url, "pytorch/pytorch") is None
    assert issue_number(7, None) == 7
    assert issue_number(None, "owner/repo") is None


def test_shards_partition_the_cases() -> None:
    cases = [Case(f"s/c{n:02d}", f"c{n}.py", "", CaseMeta()) for n in range(10)]
    parts = [shard(cases, i, 3) for i in (1, 2, 3)]
    assert sorted(c.case_id for part in parts for c in part) == sorted(c.case_id for c in cases)
    assert [len(p) for p in parts] == [4, 3, 3]
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "x", "1/0"):
        with pytest.raises(UserError):
            parse_shard(bad)


G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP
P, F = Expect.PASS, Expect.FAIL


@pytest.mark.parametrize(("previous", "current", "expect", "expected"), [
    (G, B, P, Transition.NEW_FAILURE),
    (G, B, F, Transition.NEW_FAILURE),
    (B, B, P, Transition.STILL_FAILING),
    (B, G, P, Transition.FIXED),
    (G, G, P, Transition.PASSING),
    (None, B, P, Transition.UNEXPECTED),
    (None, B, F, Transition.STILL_FAILING),
    (None, G, F, Transition.FIXED),
    (None, G, P, Transition.PASSING),
    (G, S, P, Transition.UNTESTED),
    (None, S, F, Transition.UNTESTED),
])
def test_transitions(previous: Verdict | None, current: Verdict, expect: Expect,
                     expected: Transition) -> None:
    assert transition(previous, current, expect) is expected


def test_the_module_stays_pure() -> None:
    tree = ast.parse(Path(suite.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in (node.names if isinstance(node, ast.Import) else
                              [ast.alias(node.module or "")])}
    assert not imported & {"os", "subprocess", "requests", "time", "pathlib", "sqlite3"}


def test_a_case_names_its_torchrun_processes_and_variables() -> None:
    meta = parse_meta("# /// bisect-case\n# nproc_per_node = 2\n"
                      '# env = { TORCHINDUCTOR_FREEZING = "1", TORCH_LOGS = "+dynamo" }\n'
                      "# ///\n", "case.py")
    assert meta.nproc_per_node == "2"
    assert meta.env == (("TORCHINDUCTOR_FREEZING", "1"), ("TORCH_LOGS", "+dynamo"))
    plain = parse_meta("# /// bisect-case\n# ///\n", "case.py")
    # Runs recorded before these keys existed keep their options hash; the keys change it.
    assert plain.options_hash("3.11") == hashlib.sha256(json.dumps(
        {"timeout": 600.0, "repeat": 1, "match": None, "metric": None, "threshold": None,
         "python": "3.11"}, sort_keys=True).encode()).hexdigest()[:16]
    assert meta.options_hash("3.11") != plain.options_hash("3.11")


@pytest.mark.parametrize(("meta", "words"), [
    (["nproc_per_node = 0"], "nproc_per_node must be 1 to 16"),
    (['nproc_per_node = "two"'], "nproc_per_node must be 1 to 16"),
    (['env = { LD_PRELOAD = "/x.so" }'], "env LD_PRELOAD: only torch's, Triton's and CUDA's "
                                         "switches can be set"),
    (['env = { TORCHINDUCTOR_CACHE_DIR = "/x" }'], "never a folder or search path"),
    (['env = { TORCH_LOGS = "a|b" }'], "without ` or |"),
    (["env = { TORCH_LOGS = 1 }"], "env must be a table of strings"),
])
def test_a_case_s_torchrun_and_variables_are_checked(meta: list[str], words: str) -> None:
    with pytest.raises(UserError, match=re.escape(words)):
        parse_meta("# /// bisect-case\n" + "".join(f"# {m}\n" for m in meta) + "# ///\n",
                   "case.py")


@pytest.mark.parametrize(("previous", "expect"), [
    (Verdict.GOOD, Expect.PASS), (None, Expect.PASS), (Verdict.BAD, Expect.PASS)])
def test_a_pass_of_a_case_an_open_issue_says_fails_is_its_fix(
    previous: Verdict | None, expect: Expect
) -> None:
    assert transition(previous, Verdict.GOOD, expect, filed=True) is Transition.FIXED
    assert transition(previous, Verdict.BAD, expect, filed=True) is transition(
        previous, Verdict.BAD, expect)
    assert transition(previous, Verdict.SKIP, expect, filed=True) is Transition.UNTESTED
