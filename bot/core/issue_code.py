"""Pieces of Python found in issue text: parsed, scored, joined; or why a piece is not code."""

from __future__ import annotations

import ast
import builtins
import re
import shlex
from dataclasses import dataclass

from bot.core.issue_facts import imports_torch

_TRUNCATIONS = 8  # how many times a fence-less or unterminated piece is cut at a syntax error
_BUILTINS = frozenset(dir(builtins))
_MARKS_OF_A_REPRO = ("compile", "assert", "allclose", "backward", "print")
_MARKS_OF_A_VERSION_REPORT = ("__version__", "collect_env", "get_pretty_env_info")
_PYTHON_EXE = re.compile(r"python(?:\d(?:\.\d+)?)?")
_TRACEBACK = "Traceback (most recent call last)"
# Words of a line that introduces a block as working, and as failing (which wins).
_WORKS = re.compile(
    r"\b(?:works?|worked|succeeds?|succeeded|passes|workaround|fix|fixed|fixes|no errors?"
    r"|expected (?:output|result|behaviou?r))\b", re.IGNORECASE)
_FAILS = re.compile(
    r"\b(?:fails?|failed|failing|breaks?|broken|crash(?:es|ed)?|errors? (?:out|when|with)"
    r"|raises|to reproduce|repro(?:ducer)?|wrong|incorrect|mismatch|but|not|no longer)\b"
    r"|n't\b", re.IGNORECASE)


@dataclass(frozen=True)
class Piece:
    """Code that parses and compiles, with what it defines and what it uses but does not define."""

    numbers: tuple[int, ...]  # fenced block numbers it came from; () for text outside fences
    where: str  # for Reproducer.source, e.g. "fenced block 2 (python)"
    code: str
    tree: ast.Module
    python_tagged: bool
    defined: frozenset[str]
    free: frozenset[str]
    nodes: tuple[ast.AST, ...]  # ast.walk(tree), once: big scripts make each walk costly
    lead: str = ""  # the prose line that introduces it ("To reproduce:", "This works:")

    @property
    def mentions_torch(self) -> bool:
        """Whether the code imports torch (`from torch import nn` too) or uses the name."""
        return "torch" in self.defined or "torch" in self.free or imports_torch(self.nodes)

    @property
    def undefined(self) -> tuple[str, ...]:
        """Its free names: `torch` first, then the others in the order the code first uses
        them (a frozenset has no order a message could keep to)."""
        first_use: dict[str, tuple[int, int]] = {}
        for node in self.nodes:
            if isinstance(node, ast.Name) and node.id in self.free:
                where = (node.lineno, node.col_offset)
                first_use[node.id] = min(where, first_use.get(node.id, where))
        return tuple(sorted(self.free, key=lambda name: (name != "torch",
                                                         first_use.get(name, (0, 0)), name)))

    @property
    def baseline(self) -> bool:
        """Whether its prose introduces it as what works (the reporter's baseline, a fix or a
        workaround), not as what fails: "Single operation succeeds", "This works fine"."""
        return bool(_WORKS.search(self.lead)) and not _FAILS.search(self.lead)

    @property
    def output_like(self) -> bool:
        """Only bare expressions, like a pasted `tensor([...])` result: code only if tagged."""
        return all(isinstance(statement, ast.Expr) for statement in self.tree.body)


@dataclass(frozen=True)
class Broken:
    """Text that does not compile: where, and the compiler's line and message."""

    line: int
    message: str


def parse(code: str) -> ast.Module | Broken:
    """Parse and compile (compile() also rejects e.g. `return` outside a function); never run."""
    try:
        tree = ast.parse(code)
        compile(tree, "<reproducer>", "exec", dont_inherit=True)
    except SyntaxError as error:
        return Broken(error.lineno or 0, error.msg)
    except (ValueError, UnicodeError, RecursionError, MemoryError) as error:
        # Lone surrogates fail to encode; deep nesting exhausts the parser's stack, which
        # CPython 3.11 reports as MemoryError and other versions as RecursionError.
        return Broken(0, type(error).__name__)
    return tree


def parse_prefix(code: str) -> tuple[str, ast.Module] | Broken:
    """Parse, cutting the text before its syntax error a few times: for text whose end is unknown
    (lost or unterminated fences), where prose or output follows the code."""
    result = parse(code)
    for _ in range(_TRUNCATIONS):
        if not isinstance(result, Broken) or result.line <= 1:
            break
        code = "\n".join(code.split("\n")[: result.line - 1]).rstrip()
        result = parse(code)
    return result if isinstance(result, Broken) else (code, result)


def make_piece(
    numbers: tuple[int, ...], where: str, code: str, tree: ast.Module, tagged: bool,
    lead: str = "",
) -> Piece:
    """A Piece with its defined and free names filled in."""
    nodes = tuple(ast.walk(tree))
    defined, free = _names(nodes)
    return Piece(numbers, where, code, tree, tagged, defined, free, nodes, lead)


def score(piece: Piece) -> int:
    """How much a piece looks like the reproducer rather than output or a fragment."""
    total = 2 if piece.python_tagged else 0
    total += 4 if imports_torch(piece.nodes) else 0
    total += 2 if piece.mentions_torch else 0
    kinds = (
        (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef),
        (ast.Assign, ast.AugAssign, ast.AnnAssign),
        (ast.Call,),
    )
    total += sum(any(isinstance(node, kind) for node in piece.nodes) for kind in kinds)
    total += 1 if any(mark in piece.code for mark in _MARKS_OF_A_REPRO) else 0
    total -= 3 if piece.output_like else 0
    # `import torch; print(torch.__version__)` reports an environment; it reproduces nothing.
    reports_versions = any(mark in piece.code for mark in _MARKS_OF_A_VERSION_REPORT)
    return total - (4 if reports_versions and len(piece.tree.body) < 4 else 0)


def join(pieces: list[Piece], best: int) -> Piece:
    """The best piece plus the pieces around it that it needs, or that need it (split scripts)."""
    chosen = {best}
    defined, free = set(pieces[best].defined), set(pieces[best].free)
    functions = _functions(pieces[best])
    for index in range(best + 1, len(pieces)):
        later = pieces[index]
        # A later block continues the script when it uses a name the script defines; not
        # when it is introduced as what works, or redefines the script's functions or
        # classes: both are the reporter's variant or fix, and running it too would change
        # what fails.
        if later.baseline or _functions(later) & functions:
            continue
        if later.free & defined and (later.python_tagged or not later.output_like):
            chosen.add(index)
            defined |= later.defined
            free = (free | later.free) - defined
            functions |= _functions(later)
    for index in range(best - 1, -1, -1):
        if free & pieces[index].defined:
            chosen.add(index)
            defined |= pieces[index].defined
            free = (free | pieces[index].free) - defined
    return _merged([pieces[index] for index in sorted(chosen)], pieces[best])


def _functions(piece: Piece) -> set[str]:
    """The functions and classes a piece defines at its top level."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in piece.tree.body if isinstance(node, kinds)}


def _merged(parts: list[Piece], best: Piece) -> Piece:
    """One piece from several, in document order; the best alone if the whole does not compile."""
    if len(parts) == 1:
        return best
    code = "\n\n".join(part.code for part in parts)
    tree = parse(code)
    if isinstance(tree, Broken):  # e.g. a `from __future__` import in a later block
        return best
    numbers = tuple(number for part in parts for number in part.numbers)
    where = f"fenced blocks {'+'.join(map(str, numbers))} ({best.where.partition('(')[2]}"
    return make_piece(numbers, where, code, tree, best.python_tagged, best.lead)


def _names(nodes: tuple[ast.AST, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """(names bound anywhere, names loaded but never bound and not builtins): an over-approximation
    of scope that is enough to see that one block uses what another defines."""
    defined: set[str] = set()
    used: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else defined).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.alias):
            defined.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined.add(node.name)
    return frozenset(defined), frozenset(used - defined - _BUILTINS)


def strip_prompts(text: str) -> tuple[str, bool]:
    """Recover code from a doctest or IPython session: keep prompted lines, drop their output."""
    first = next((line.lstrip() for line in text.split("\n") if line.strip()), "")
    if not (first.startswith(">>>") or re.match(r"In \[\d+\]:", first)):
        return text, False
    kept: list[str] = []
    for line in text.split("\n"):
        bare = line.lstrip()
        for prompt in (">>> ", "... ", ">>>", "..."):
            if bare.startswith(prompt) and (prompt.endswith(" ") or bare == prompt):
                kept.append(bare[len(prompt) :])
                break
        else:
            match = re.match(r"(?:In \[\d+\]|\s*\.\.\.): ?", bare)
            if match is not None:
                kept.append(bare[match.end() :])
    return "\n".join(kept), True


def cut_traceback(text: str) -> str:
    """The text before the first line that starts a Python traceback."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.lstrip().startswith(_TRACEBACK):
            return "\n".join(lines[:index]).rstrip()
    return text


def python_c_scripts(text: str) -> list[str]:
    """The scripts of `python -c '...'` commands in a shell block (prompts `$ ` removed)."""
    lines = [
        line.lstrip()[2:] if line.lstrip().startswith("$ ") else line for line in text.split("\n")
    ]
    scripts: list[str] = []
    if "-c" not in text:  # shlex is slow on big blocks; skip those that cannot hold a -c
        return scripts
    for chunk in ["\n".join(lines), *lines]:  # whole block first: quotes may span lines
        try:
            words = shlex.split(chunk)
        except ValueError:
            continue
        for index in range(len(words) - 2):
            program = words[index].rsplit("/", 1)[-1]
            if _PYTHON_EXE.fullmatch(program) and words[index + 1] == "-c":
                scripts.append(words[index + 2])
        if scripts:
            break
    return scripts


# Calls that end a script with a failure, or check a result and raise when it is wrong (any
# assert* too); `main` only as unittest's or pytest's.
_FAILING_CALLS = frozenset({"exit", "_exit", "quit", "abort", "fail", "run_tests"})
_TEST_RUNNERS = frozenset({"unittest", "pytest"})


def checks_itself(script: str) -> bool:
    """Whether `script` can fail other than by an error inside torch: an `assert`, a `raise`,
    an exit, or a check such as `torch.testing.assert_close` or a unittest/pytest run. One that
    only prints what it compares passes on every build, wrong numbers and all. A script that
    does not parse is given the benefit of the doubt."""
    tree = parse(script)
    if isinstance(tree, Broken):
        return True
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assert, ast.Raise)):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.startswith(("assert", "Assert")) or name in _FAILING_CALLS:
                return True
            if (name == "main" and isinstance(func, ast.Attribute)
                    and getattr(func.value, "id", "") in _TEST_RUNNERS):
                return True
    return False


def never_runs(tree: ast.Module) -> tuple[str, ...]:
    """The functions and classes a script defines, when it defines some and runs nothing
    else: a fragment (a library's helper, a test method pasted out of its class) passes on
    every build. () for a script that runs something, imports alone included (a crash on
    `import torch` is a reproducer)."""
    defined: list[str] = []
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.append(statement.name)
        elif isinstance(statement, (ast.Import, ast.ImportFrom, ast.Pass)):
            continue
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring
        elif (isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None
              and not any(isinstance(node, ast.Call) for node in ast.walk(statement.value))):
            continue  # a constant: `N = 8`, `SHAPES = [(2, 3)]`
        else:
            return ()
    return tuple(defined)
