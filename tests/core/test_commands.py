"""Comment text -> Command: a table of comments, error messages, and Hypothesis properties."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.commands import USAGE, Action, Command, parse_comment, usage
from bot.core.errors import UserError

BISECT = Action.BISECT
FENCE = "```"


@pytest.mark.parametrize(
    ("comment", "fields"),
    [
        ("@torch-bisect-bot bisect", {"action": BISECT}),
        ("/bisect", {"action": BISECT}),
        ("/bisect help", {"action": Action.HELP}),
        ("/bisect cancel", {"action": Action.CANCEL}),
        ("@torch-bisect-bot help", {"action": Action.HELP}),
        ("@Torch-Bisect-Bot CANCEL", {"action": Action.CANCEL}),
        ("@torch-bisect-bot: bisect fix", {"find_fix": True}),
        (
            "@torch-bisect-bot bisect good=2.12.0 bad=2.13.0.dev20260521+cu130 repeat=3",
            {"good": "2.12.0", "bad": "2.13.0.dev20260521+cu130", "repeat": 3},
        ),
        ("/bisect good=2026-05-01 bad=latest", {"good": "2026-05-01", "bad": "latest"}),
        ("/bisect bad=LATEST variant=CU130", {"bad": "latest", "variant": "cu130"}),
        ("/bisect variant=rocm6.4 python=3.14", {"variant": "rocm6.4", "python": "3.14"}),
        ("/bisect variant=xpu python=3.10", {"variant": "xpu", "python": "3.10"}),
        ("/bisect timeout=600", {"timeout_s": 600}),
        ("/bisect timeout=600s", {"timeout_s": 600}),
        ("/bisect timeout=10m", {"timeout_s": 600}),
        ("/bisect timeout=2h", {"timeout_s": 7200}),
        ('/bisect match="CUDA error: .*"', {"match": "CUDA error: .*"}),
        (r"/bisect match='max diff \d+\.\d+'", {"match": r"max diff \d+\.\d+"}),
        (r"/bisect match=#\d+", {"match": r"#\d+"}),
        ("/bisect match=\u201cillegal memory access\u201d", {"match": "illegal memory access"}),
        (
            '/bisect metric="max abs diff: (\\S+)" threshold=1e-2',
            {"metric": "max abs diff: (\\S+)", "threshold": 0.01},
        ),
        ("/bisect good=2.12.0 fix", {"good": "2.12.0", "find_fix": True}),
        ("Could you look?\n\n@torch-bisect-bot bisect repeat=2\n\nThanks!", {"repeat": 2}),
        ("  /bisect repeat=5", {"repeat": 5}),
        ("please @torch-bisect-bot bisect bad=2.13.0", {"bad": "2.13.0"}),
        (f"{FENCE}\n/bisect repeat=9\n{FENCE}\n/bisect repeat=4", {"repeat": 4}),
        ("> /bisect repeat=9\n\n/bisect repeat=3", {"repeat": 3}),
        (f"1. {FENCE}\n   /bisect repeat=9\n   {FENCE}\n/bisect repeat=2", {"repeat": 2}),
        ("<pre>\n/bisect repeat=9\n</pre>\n/bisect repeat=8", {"repeat": 8}),
        ("/bisect repeat=5\n<pre>\nrepeat=9\n</pre>", {"repeat": 5}),
        ("`@torch-bisect-bot bisect repeat=9` is how.\n/bisect repeat=6", {"repeat": 6}),
        ("<!-- /bisect repeat=9 -->\n/bisect repeat=7", {"repeat": 7}),
        ("/bisect\r\n", {"action": BISECT}),
        ("/Bisect good=2.12.0", {"good": "2.12.0"}),
        ("/BISECT", {"action": BISECT}),
        ("  /BiSeCt help", {"action": Action.HELP}),
        ("/bisect: good=2.12.0", {"good": "2.12.0"}),
        ("/bisect:", {"action": BISECT}),
    ],
)
def test_commands(comment: str, fields: dict[str, Any]) -> None:
    command = parse_comment(comment)
    assert command is not None
    for name, value in {"action": BISECT, **fields}.items():
        assert getattr(command, name) == value, name


@pytest.mark.parametrize(
    "comment",
    [
        "",
        "LGTM, thanks",
        "thanks @torch-bisect-bot!",
        "cc @torch-bisect-bot-dev bisect",
        "email me at someone@torch-bisect-bot.org bisect",
        "> @torch-bisect-bot bisect",
        "> /bisect",
        f"{FENCE}\n@torch-bisect-bot bisect\n{FENCE}",
        "~~~text\n/bisect\n~~~",
        # A fence may open on a list item's line; <pre> shows its text as written.
        f"1. {FENCE}\n   /bisect good=2.12.0\n   {FENCE}",
        f"- {FENCE}sh\n  @torch-bisect-bot bisect\n  {FENCE}",
        f"* 2) {FENCE}\n/bisect\n{FENCE}",
        "<pre>\n/bisect good=2.12.0\n</pre>",
        "<PRE class='x'>\n\n@torch-bisect-bot bisect\n</Pre>",
        "<pre>/bisect</pre>",
        "run `/bisect` or `@torch-bisect-bot bisect` to start",
        "<!-- @torch-bisect-bot bisect -->",
        "/bisection is what we need",
        "/Bisection is what we need",
        "/BISECTOR good=2.12.0",
        "see foo/Bisect good=2.12.0",
        "> /Bisect good=2.12.0",
        "it's @torch-bisect-bot's fault",
        "/bisect " + "x" * 70_000,  # longer than GitHub allows: ignored, not parsed
    ],
)
def test_no_command(comment: str) -> None:
    assert parse_comment(comment) is None


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("@torch-bisect-bot", "Tell me what to do"),
        ("@torch-bisect-bot frobnicate", "I do not know the command `frobnicate`"),
        ("/bisect foo=1", "I do not know the option `foo`"),
        ("/bisect good=2.12.0 please", "`please` is not an option"),
        ("/bisect repeat=1\n/bisect repeat=2", "One command per comment: I found 2"),
        ("/bisect repeat=2 repeat=3", "`repeat=` is given twice"),
        ("/bisect fix fix", "`fix` is given twice"),
        ("/bisect good=2.x", "give a version like 2.12.0"),
        ("/bisect good=20260521", "write dates as YYYY-MM-DD"),
        ("/bisect bad=2026-02-30", "that date does not exist"),
        ("/bisect bad=2026-5-1", "give a version like"),
        ("/bisect variant=cuda", "a variant is cpu"),
        ("/bisect python=3.9", "from 3.10 to 3.14"),
        ("/bisect python=3.15", "from 3.10 to 3.14"),
        ("/bisect python=3", "from 3.10 to 3.14"),
        ("/bisect repeat=0", "1 to 20 times"),
        ("/bisect repeat=21", "1 to 20 times"),
        ("/bisect repeat=two", "1 to 20 times"),
        ("/bisect timeout=0", "1 to 7200 seconds"),
        ("/bisect timeout=3h", "1 to 7200 seconds"),
        ("/bisect timeout=10min", "1 to 7200 seconds"),
        ("/bisect match=(", "not a Python regular expression"),
        ("/bisect match=" + "a" * 201, "at most 200 characters"),
        ("/bisect metric=diff:(\\S+)", "go together"),
        ("/bisect threshold=0.1", "go together"),
        ("/bisect metric=(x) threshold=abc", "a threshold is a finite number"),
        ("/bisect metric=(x) threshold=nan", "a threshold is a finite number"),
        ("/bisect metric=Greatest threshold=0.1", "puts the number in a (group)"),
        ("/bisect match='unclosed", "A quote is not closed"),
        ("/bisect with=", "give 1 to 10 package names"),
        ("/bisect with=" + ",".join("abcdefghijk"), "give 1 to 10 package names"),
        ("/bisect with=evil@https://example.com/x.whl", "not a package name"),
        ("/bisect 'with=attrs; python_version>\"3\"'", "not a package name"),
        ("/bisect with=torch==2.0.0", "comes with the build under test"),
        ("/bisect env=LD_PRELOAD=/x.so", "LD_PRELOAD: only torch's, Triton's and CUDA's"),
        ("/bisect env=TORCHINDUCTOR_CACHE_DIR=/x", "never a folder or search path"),
        ("/bisect env=freezing", "give variables as NAME=VALUE"),
        ("/bisect nproc=0", "`nproc=` is 1 to 16, or gpu, cpu or auto"),
        ("/bisect nproc=17", "`nproc=` is 1 to 16, or gpu, cpu or auto"),
        ("/bisect with=pytorch_triton", "comes with the build under test"),
        ("/bisect help me", "`help` takes no options"),
        ("@torch-bisect-bot cancel now", "`cancel` takes no options"),
    ],
)
def test_errors_name_the_problem_and_show_usage(comment: str, message: str) -> None:
    with pytest.raises(UserError) as raised:
        parse_comment(comment)
    assert message in str(raised.value)
    assert USAGE in str(raised.value)


def test_handle_is_a_parameter() -> None:
    assert parse_comment("@torch-bisect-bot bisect", handle="nightly-bisector") is None
    command = parse_comment("@nightly-bisector bisect repeat=2", handle="@nightly-bisector")
    assert command == Command(BISECT, repeat=2)
    assert "@nightly-bisector cancel" in usage("nightly-bisector")
    with pytest.raises(ValueError):
        parse_comment("/bisect", handle="@")


def test_to_dict() -> None:
    command = parse_comment("/bisect good=2.12.0 metric=(x) threshold=2 fix with=attrs nproc=2 "
                            "env='TORCH_LOGS=+dynamo,graph TORCHINDUCTOR_FREEZING=1' hang=bad "
                            "args=\"--size 8 --name 'a b'\"")
    assert command is not None
    assert command.to_dict() == {
        "args": ["--size", "8", "--name", "a b"],
        "hang": "bad",
        "processes": "2",
        "env": {"TORCH_LOGS": "+dynamo,graph", "TORCHINDUCTOR_FREEZING": "1"},
        "packages": ["attrs"],
        "action": "bisect",
        "good": "2.12.0",
        "bad": None,
        "variant": None,
        "python": None,
        "repeat": None,
        "timeout_s": None,
        "match": None,
        "metric": "(x)",
        "threshold": 2.0,
        "find_fix": True,
    }


@pytest.mark.parametrize(
    ("comment", "fields"),
    [
        ("/bisect good=2026-05-10\nbad=2026-05-20\nrepeat=3",
         {"good": "2026-05-10", "bad": "2026-05-20", "repeat": 3}),
        ("/bisect good=2026-05-10 \\\n  bad=2026-05-20 \\\n  repeat=3",
         {"good": "2026-05-10", "bad": "2026-05-20", "repeat": 3}),
        ("/bisect good=2026-05-10 \\\n    bad=2026-05-20", {"bad": "2026-05-20"}),
        ("/bisect \\\nrepeat=2", {"repeat": 2}),
        ("/bisect\ngood=2026-05-10 FIX", {"good": "2026-05-10", "find_fix": True}),
        ("@torch-bisect-bot bisect good=2.12.0\nfix", {"good": "2.12.0", "find_fix": True}),
        ("please @torch-bisect-bot bisect bad=2.13.0\nmatch='CUDA error: .*' repeat=2",
         {"bad": "2.13.0", "match": "CUDA error: .*", "repeat": 2}),
        ("/bisect good=2026-05-10\nbad=2026-05-20\nThanks, it's flaky.\nrepeat=3",
         {"bad": "2026-05-20", "repeat": None}),
        # Past a blank line, a line of options alone goes on with the command.
        ("/bisect good=2026-05-10\nbad=2026-05-20\n\nrepeat=3", {"bad": "2026-05-20", "repeat": 3}),
        ("/bisect good=2.5.1\n\nbad=2.6.0.dev20241120", {"bad": "2.6.0.dev20241120"}),
        ("/bisect good=2026-05-10\n\n\nrepeat=3\n \nfix\nbad=2026-05-20",
         {"repeat": 3, "find_fix": True, "bad": "2026-05-20"}),
        ("/bisect good=2026-05-10\n<!-- -->\nrepeat=3", {"repeat": 3}),  # hidden: a blank line
        ("/bisect good=2026-05-10\n\nrepeat=3 is what I would try", {"repeat": None}),
        ("/bisect good=2026-05-10\n\nrepeat=3 # flaky\n", {"repeat": None}),
        ("/bisect good=2026-05-10\n\ngood = 2.4.0", {"good": "2026-05-10"}),
        ("/bisect good=2026-05-10\n\n    repeat=3", {"repeat": None}),  # indented code
        ("/bisect good=2026-05-10\n\n> repeat=3", {"repeat": None}),
        ("/bisect good=2026-05-10\n\nThanks!\n\nrepeat=3", {"repeat": None}),
        (f"/bisect good=2026-05-10\n\n{FENCE}\n{FENCE}\nrepeat=3", {"repeat": None}),
    ],
)
def test_options_on_the_lines_below_the_command(comment: str, fields: dict[str, Any]) -> None:
    """Option lines right below the command (wrapped, or continued with ` \\`) belong to it,
    up to the first line that is not options; past blank lines, a line of options alone does
    too, and anything else there is prose."""
    command = parse_comment(comment)
    assert command is not None
    for name, value in fields.items():
        assert getattr(command, name) == value, name


@pytest.mark.parametrize(
    "comment",
    [
        "/bisect good=2026-05-10\nfix this soon please",
        "/bisect good=2026-05-10\nBad: it hangs on latest.",
        "/bisect good=2026-05-10\nbad:latest hangs too",
        "/bisect good=2026-05-10\nPython: 3.12 on Linux",
        "/bisect good=2026-05-10\nWith the nightly it hangs.",
        "/bisect good=2026-05-10\ncolour=red",
        "/bisect good=2026-05-10\n> repeat=3",
        f"/bisect good=2026-05-10\n{FENCE}\nrepeat=3\n{FENCE}",
        f"/bisect good=2026-05-10\n{FENCE}\n{FENCE}\nrepeat=3",
        "/bisect good=2026-05-10\nit's 'repeat=3'",
    ],
)
def test_prose_below_a_command_stays_prose(comment: str) -> None:
    assert parse_comment(comment) == Command(BISECT, good="2026-05-10")


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("/bisect good=2.5.1\nrepeat=3 # flaky on H100",
         "The line `repeat=3 # flaky on H100` below the command holds words that are not options "
         "(`# flaky on H100`): I take a line below the command only when it holds nothing but "
         "options, so put a remark on a line of its own, after the options."),
        ("@torch-bisect-bot bisect good=2.5.1\nvariant=cu126 (the reporter's build)",
         "The line `variant=cu126 (the reporter's build)` below the command holds words that "
         "are not options (`(the reporter's build)`)"),
        ("/bisect good=2.5.1\nbad=latest and repeat=3", "(`and repeat=3`)"),
        ("/bisect good=2.5.1\nrepeat=3 is what I would try", "(`is what I would try`)"),
        ("/bisect\n\nrepeat=3\nbad=latest # newest", "The line `bad=latest # newest` below"),
        ("/bisect good=2.5.1\ngood = 2.4.0",
         "The line `good = 2.4.0` below the command: write an option as `key=value`, with `=` "
         "and no spaces around it: `good=2.4.0`."),
        ("/bisect good=2.5.1\nbad:2.6.0", "The line `bad:2.6.0` below the command: write an "
         "option as `key=value`, with `=` and no spaces around it: `bad=2.6.0`."),
        ("/bisect good=2.5.1\nbad= 2.6.0", "The line `bad= 2.6.0` below the command: write"),
        ("/bisect good=2.5.1\nmatch='CUDA error", "in `match='CUDA`: close it"),
    ],
)
def test_a_line_below_that_starts_as_options_but_holds_more_is_refused(
        comment: str, message: str) -> None:
    """Read as prose, such a line would drop its options unsaid; the message names it."""
    test_errors_name_the_problem_and_show_usage(comment, message)


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("/bisect good=2026-05-10\n/bisect good=2026-05-15 repeat=3",
         "One command per comment: I found 2 (`/bisect good=2026-05-10` and "
         "`/bisect good=2026-05-15 repeat=3`); post them separately."),
        ("/bisect cancel\n/bisect good=2026-05-10",
         "I found 2 (`/bisect cancel` and `/bisect good=2026-05-10`)"),
        ("/bisect good=2026-05-10\n\nThen: @torch-bisect-bot bisect fix",
         "I found 2 (`/bisect good=2026-05-10` and `@torch-bisect-bot bisect fix`)"),
        ("/bisect good=2026-05-10\n/bisect bad=2026-02-30",  # refused before either is read
         "I found 2"),
        ("/bisect good=2026-05-10 bad=2026-05-20 repeat=3 variant=cu130\n/bisect help",
         "I found 2 (`/bisect good=2026-05-10 bad=2026-05-20…` and `/bisect help`)"),
        ("/bisect repeat=1\n" * 4, "I found 4 (`/bisect repeat=1`, `/bisect repeat=1`, "
         "`/bisect repeat=1`, …)"),
        ("/bisect repeat=1\n/bisect match=`x`", "and `` /bisect match=`x` ``)"),
    ],
)
def test_a_second_command_is_refused(comment: str, message: str) -> None:
    test_errors_name_the_problem_and_show_usage(comment, message)


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("/bisect good=2026-05-10 because now it's broken",
         "A quote is not closed in the command, in `it's`: the options end the command's line, "
         "so words after them go on the next line (and a value with spaces is quoted, "
         'env="A=1 B=2").'),
        ("/bisect good=2026-05-10 now it\u2019s broken", "in `it\u2019s`: the options end"),
        ("/bisect match='unclosed value", "in `match='unclosed`: close it"),
        ('/bisect match="a b" now it\'s broken', "in `it's`: the options end"),
        ("/bisect good=2026-05-10 # worked then",
         "`#` is not an option (they are `key=value`, or `fix`): the options end the "
         "command's line, so words after them go on the next line."),
        ("/bisect good=2026-05-10 because it broke", "`because` is not an option"),
        ("/bisect good=2026-05-10 `x`", "`` `x` `` is not an option"),
        ("/bisect repeat=2 --good=2.12.0", "I do not know the option `--good`."),
        ("/bisect repeat=2 --good 2.12.0", "I do not know the option `--good`."),
        ("/bisect colour=red", "I do not know the option `colour`."),
    ],
)
def test_words_after_the_options_go_on_the_next_line(comment: str, message: str) -> None:
    test_errors_name_the_problem_and_show_usage(comment, message)


_QUOTE_ENV = ('`TORCHINDUCTOR_FREEZING` looks like a second variable of `env=`: quote several '
              'variables, env="A=1 B=2".',)
_ONE_VARIANT = ("name different variants",
                "say which with `variant=` (it wins over the `+…` of the ends")


@pytest.mark.parametrize(
    ("comment", "said"),
    [
        ("/bisect env=TORCH_LOGS=+dynamo TORCHINDUCTOR_FREEZING=1", _QUOTE_ENV),
        ("/bisect env='TORCH_LOGS=+dynamo' TORCHINDUCTOR_FREEZING=1", _QUOTE_ENV),
        ("/bisect good=2026-05-10\nenv=TORCH_LOGS=+dynamo TORCHINDUCTOR_FREEZING=1", _QUOTE_ENV),
        # ends of two variants and no variant=: a bisection tests builds of one
        ("/bisect good=2.6.0.dev20241112+cpu bad=2.6.0.dev20241120+cu121", _ONE_VARIANT),
        ("/bisect good=2.5.1+cu124 bad=2.6.0.dev20241120+CU126", _ONE_VARIANT),
    ],
)
def test_a_refusal_says_what_to_write_instead(comment: str, said: tuple[str, ...]) -> None:
    with pytest.raises(UserError) as raised:
        parse_comment(comment)
    assert all(words in str(raised.value) for words in said), str(raised.value)


SPACED = "write an option as `key=value`, with `=` and no spaces around it: "


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("/bisect good = 2.5.1", SPACED + "`good=2.5.1`."),
        ("/bisect good =2.5.1", SPACED + "`good=2.5.1`."),
        ("@torch-bisect-bot bisect good= 2.5.1", SPACED + "`good=2.5.1`."),
        ("/bisect repeat=2 bad = latest", SPACED + "`bad=latest`."),
        ("/bisect good:2.5.1", SPACED + "`good=2.5.1`."),
        ("/bisect good: 2.5.1", SPACED + "`good=2.5.1`."),
        ("/bisect repeat=2 Variant:cu126", SPACED + "`variant=cu126`."),
        ("/bisect env= TORCH_LOGS=+dynamo", SPACED + "`env=TORCH_LOGS=+dynamo`."),
        ("/bisect good=2.5.1, bad=2.6.0",
         "`good=2.5.1,`: separate options with spaces, not commas: `good=2.5.1 …`."),
        ("/bisect good=2.5.1,bad=2.6.0",
         "`good=2.5.1,bad=2.6.0`: separate options with spaces, not commas: "
         "`good=2.5.1 bad=2.6.0`."),
        ("/bisect repeat=3, fix", "`repeat=3,`: separate options with spaces, not commas"),
        ("/bisect with=transformers==4.57.1 einops",
         "`einops` is not an option: separate the packages of `with=` with commas, and no "
         "spaces: `with=transformers==4.57.1,einops`."),
        ("/bisect with=einops, transformers==4.57.1",
         "`transformers==4.57.1` is not an option: separate the packages of `with=` with "
         "commas, and no spaces: `with=einops,transformers==4.57.1`."),
    ],
)
def test_an_option_written_almost_right_gets_the_fix(comment: str, message: str) -> None:
    test_errors_name_the_problem_and_show_usage(comment, message)


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("/bisect good=2.x, bad=2.6.0", "`good=2.x,`: give a version like"),  # not the comma
        ("/bisect good=2.5.1,2.5.2", "`good=2.5.1,2.5.2`: give a version like"),
        ("/bisect good = ", "I do not know the command `good`."),
        ("/bisect goodness = 2.5.1", "I do not know the command `goodness`."),
        ("@torch-bisect-bot bad: it hangs", "I do not know the command `bad:`."),
        ("/bisect good=2.5.1 bad: it hangs", "`bad:` is not an option (they are"),
    ],
)
def test_a_hint_is_given_only_where_the_fix_is_clear(comment: str, message: str) -> None:
    test_errors_name_the_problem_and_show_usage(comment, message)


def test_a_variable_not_after_env_is_an_unknown_option() -> None:
    with pytest.raises(UserError, match="I do not know the option `torch_logs`"):
        parse_comment("/bisect good=2.12.0 TORCH_LOGS=+dynamo")


@pytest.mark.parametrize(
    ("comment", "fields"),
    [
        ("/bisect\u00a0good=2026-05-10", {"good": "2026-05-10"}),
        ("/bisect good=2026-05-10\u00a0bad=2026-05-20", {"good": "2026-05-10", "bad": "2026-05-20"}),
        ("/bisect\u3000repeat=2\u2003fix", {"repeat": 2, "find_fix": True}),
        ("@torch-bisect-bot\u2003bisect\u202frepeat=2", {"repeat": 2}),
        ("@torch-bisect-bot:\u00a0bisect repeat=2", {"repeat": 2}),
        ('/bisect match="a\u00a0b"', {"match": "a\u00a0b"}),  # kept inside quotes
    ],
)
def test_unicode_spaces_separate_words(comment: str, fields: dict[str, Any]) -> None:
    test_commands(comment, fields)


@pytest.mark.parametrize(
    "comment",
    [
        "    /bisect good=2026-05-10",
        "\t/bisect good=2026-05-10",
        "  \t@torch-bisect-bot bisect repeat=2",
        "Run this:\n\n    /bisect repeat=2\n    /bisect cancel",
        "- /bisect good=2026-05-10",
        "1. /bisect good=2026-05-10",
    ],
)
def test_indented_code_and_list_items_give_no_command(comment: str) -> None:
    assert parse_comment(comment) is None


def test_an_indented_command_beside_a_real_one_is_not_counted() -> None:
    comment = "It was this:\n\n    /bisect repeat=9\n\n/bisect repeat=3"
    assert parse_comment(comment) == Command(BISECT, repeat=3)
    assert "code blocks \\\n(fenced or indented)" not in USAGE
    assert "(fenced or indented)" in USAGE


def test_usage_says_edits_are_not_read() -> None:
    for text in (USAGE, usage("nightly-bisector")):
        assert "Edits of a comment are not read, so post a corrected command in a new " \
               "comment." in text


# Hypothesis: arbitrary comments never raise anything but UserError; valid commands round-trip.
PATTERN_CHARS = st.characters(
    blacklist_categories=("Cs", "Cc", "Zl", "Zp"),
    blacklist_characters="\u201c\u201d\u2018\u2019\x85",
)


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return "<!--" not in pattern


PATTERNS = st.text(PATTERN_CHARS, min_size=1, max_size=40).filter(_compiles)
VERSIONS = st.sampled_from(["2.12.0", "2.13.0.dev20260521+cu130", "1.13.1", "2.15.0rc1"])
DATES = st.dates().filter(lambda day: day.year >= 1000).map(lambda day: day.isoformat())
BOUNDS = st.one_of(st.none(), st.just("latest"), VERSIONS, DATES)
COMMANDS = st.builds(
    Command,
    action=st.just(BISECT),
    good=BOUNDS,
    bad=BOUNDS,
    variant=st.one_of(st.none(), st.sampled_from(["cpu", "cu126", "cu130", "rocm6.4", "xpu"])),
    python=st.one_of(st.none(), st.sampled_from([f"3.{minor}" for minor in range(10, 15)])),
    repeat=st.one_of(st.none(), st.integers(1, 20)),
    timeout_s=st.one_of(st.none(), st.integers(1, 7200)),
    match=st.one_of(st.none(), PATTERNS),
    metric=st.none(),
    threshold=st.none(),
    find_fix=st.booleans(),
    processes=st.one_of(st.none(), st.sampled_from(["1", "2", "16", "gpu", "auto"])),
    env=st.lists(st.tuples(st.sampled_from(["TORCH_LOGS", "TORCHINDUCTOR_FREEZING",
                                            "TRITON_DEBUG", "CUDA_LAUNCH_BLOCKING"]),
                           st.sampled_from(["1", "+dynamo,graph", "0"])),
                 max_size=3, unique_by=lambda pair: pair[0]).map(tuple),
    hang=st.one_of(st.none(), st.sampled_from(["bad", "skip"])),
    args=st.one_of(st.none(), st.lists(st.sampled_from(
        ["--size", "8", "-n", "a b", "it's", '"q"', "--x=1", "", "--mode=max-autotune"]),
        max_size=4).map(tuple)),
)
METRICS = st.tuples(PATTERNS.map(lambda text: f"{text}(\\S+)").filter(
    lambda text: _compiles(text) and re.compile(text).groups > 0),
                    st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=300, deadline=None)
@given(COMMANDS, st.one_of(st.none(), METRICS), st.sampled_from(["", "Thanks!\n\n", "> hi\n"]))
def test_rendered_commands_round_trip(
    command: Command, metric: tuple[str, float] | None, before: str
) -> None:
    if metric is not None:
        command = Command(**{**command.__dict__, "metric": metric[0], "threshold": metric[1]})
    assert parse_comment(before + command.render()) == command
    assert parse_comment(before + command.render("other-bot"), handle="other-bot") == command


# What may stand between two options: Unicode spaces, a wrap, a shell-style continuation.
SEPARATORS = st.sampled_from([" ", "\u00a0", "\u2003", "\u3000", "\n", " \\\n  ", "\n    "])


def _spaces_between_words(line: str) -> list[int]:
    """Where a rendered command has a space outside quotes, after `@bot bisect`."""
    quote = ""
    spaces = []
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == " ":
            spaces.append(index)
    return spaces[1:]


@settings(max_examples=200, deadline=None)
@given(COMMANDS, st.data())
def test_wrapped_commands_read_as_one_line(command: Command, data: st.DataObject) -> None:
    line = command.render()
    text = list(line)
    for index in _spaces_between_words(line):
        text[index] = data.draw(SEPARATORS)
    assert parse_comment("".join(text)) == command


COMMENT_PIECES = st.sampled_from(
    ["/bisect", "@torch-bisect-bot", "bisect", "help", "cancel", "good=", "bad=2.12.0", "fix",
     "match='", '"', "`", "```", "> ", "<!--", "-->", "repeat=3", "timeout=9m", "\n", " ", "="]
)  # fmt: skip
COMMENTS = st.one_of(st.text(), st.lists(COMMENT_PIECES, max_size=30).map("".join))


@settings(max_examples=400, deadline=None)
@given(COMMENTS)
def test_any_comment_gives_a_command_none_or_a_user_error(comment: str) -> None:
    try:
        command = parse_comment(comment)
    except UserError as error:
        assert "**Usage**" in str(error)
        return
    assert command is None or isinstance(command.action, Action)




@pytest.mark.parametrize(
    ("comment", "variant"),
    [
        # variant= wins over the ends' `+…` (job_plan.settings), as the usage says
        ("/bisect good=2.6.0.dev20241112+cpu bad=2.6.0.dev20241120+cu121 variant=cu124",
         "cu124"),
        ("/bisect good=2.5.1 bad=2.6.0.dev20241112+cu121 variant=cu124", "cu124"),
        ("/bisect good=2.6.0.dev20241112+cu121 bad=2.6.0.dev20241120+cu121", None),
        ("/bisect good=2.5.1 bad=2.6.0.dev20241120+cu121", None),
        ("/bisect good=2.6.0.dev20241112+cu121 bad=latest", None),
    ],
)
def test_ends_of_one_variant_or_a_variant_option_are_taken(comment: str,
                                                           variant: str | None) -> None:
    command = parse_comment(comment)
    assert command is not None and command.variant == variant
    assert "it wins over the `+cu126` that a `good=`/`bad=` version" in USAGE


def test_hang_says_what_a_run_that_times_out_is():
    command = parse_comment("/bisect hang=BAD timeout=5m")
    assert command is not None and (command.hang, command.timeout_s) == ("bad", 300)
    assert parse_comment("/bisect") == Command(Action.BISECT)  # skip, the default, unsaid
    with pytest.raises(UserError, match="`hang=` is `bad`"):
        parse_comment("/bisect hang=maybe")
