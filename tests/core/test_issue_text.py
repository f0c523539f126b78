"""Issue text -> Reproducer: the corpus in tests/data/issues, table tests, and fuzzing."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.core.commands import Action, Command, with_form
from bot.core.errors import UserError
from bot.core.issue_code import checks_itself
from bot.core.issue_facts import FORM_DEFAULT, spawned_gpus
from bot.core.issue_text import Reproducer, extract_reproducer
from bot.core.job_plan import JobPlan, Settings

CORPUS = Path(__file__).parent.parent / "data" / "issues"
CASES = sorted(path.name.removesuffix(".md") for path in CORPUS.glob("*.md"))


def _body(name: str, expected: dict[str, Any]) -> str:
    # newline="" keeps CRLF files as they are; the huge case is padded here, not stored.
    with open(CORPUS / f"{name}.md", encoding="utf-8", newline="") as raw:
        body = raw.read()
    pad = expected.get("pad_to_bytes", 0)
    line = "step 1234 | loss 2.3025 | lr 3.0e-04 | grad-norm 0.98 | tokens/s 182334\n"
    return body + line * (pad // len(line) + 1) if pad else body


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 25
    assert all((CORPUS / f"{name}.expected.json").exists() for name in CASES)


@pytest.mark.parametrize("name", CASES)
def test_corpus(name: str) -> None:
    expected = json.loads((CORPUS / f"{name}.expected.json").read_text(encoding="utf-8"))
    body = _body(name, expected)
    if "error_contains" in expected:
        with pytest.raises(UserError) as raised:
            extract_reproducer(body)
        assert expected["error_contains"] in str(raised.value)
        return
    found = extract_reproducer(body)
    for fragment in expected["script_contains"]:
        assert fragment in found.script
    for fragment in expected.get("script_excludes", []):
        assert fragment not in found.script
    assert found.needs_cuda is expected["needs_cuda"]
    assert found.reported_version == expected["reported_version"]
    assert found.reported_python == expected["reported_python"]
    assert list(found.imports) == expected["imports"]
    assert list(found.companions) == expected.get("companions", [])
    if "source" in expected:
        assert found.source == expected["source"]
    assert found.processes == expected.get("processes")
    assert dict(found.env) == expected.get("env", {})
    compile(found.script, name, "exec")  # what we hand to the runner always compiles


REAL = Path(__file__).parent.parent / "data" / "real_issues"
REAL_CASES = sorted(path.name.removesuffix(".md") for path in REAL.glob("[0-9]*.md"))


def test_the_real_issues_are_there() -> None:
    assert len(REAL_CASES) >= 25


@pytest.mark.parametrize("name", REAL_CASES)
def test_real_issue(name: str) -> None:
    """Excerpts of real pytorch/pytorch issues (tests/data/real_issues/README.md)."""
    expected = json.loads((REAL / f"{name}.expected.json").read_text(encoding="utf-8"))
    body = (REAL / f"{name}.md").read_text(encoding="utf-8")
    if "error_contains" in expected:
        with pytest.raises(UserError) as raised:
            extract_reproducer(body, expected["title"])
        assert expected["error_contains"] in str(raised.value)
        return
    found = extract_reproducer(body, expected["title"])
    assert found.source == expected["source"]
    assert all(fragment in found.script for fragment in expected["script_contains"])
    fields = ("needs_cuda", "reported_version", "reported_python", "reported_good", "processes")
    assert {field: getattr(found, field) for field in fields} == {
        field: expected[field] for field in fields}
    assert (list(found.imports), list(found.companions), dict(found.env)) == (
        expected["imports"], expected["companions"], expected["env"])


FENCE = "```"


@pytest.mark.parametrize(
    ("body", "cuda"),
    [
        ("import torch\nx = torch.ones(2, device='cuda:1')", True),
        ("import torch\nx = torch.ones(2).to('cuda')", True),
        ("import torch\nassert torch.cuda.is_available()", True),
        ("import torch\nd = torch.device(f'cuda:{0}')", True),
        ("import torch\nprint(torch.version.cuda)", False),
        ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = False", False),
        ("import torch\n# x.cuda()\nprint('cuda kernels are fine')", False),
    ],
)
def test_needs_cuda(body: str, cuda: bool) -> None:
    found = extract_reproducer(f"{FENCE}python\n{body}\n{FENCE}\n")
    assert found.needs_cuda is cuda


@pytest.mark.parametrize(
    ("versions", "torch_version", "python"),
    [
        ("PyTorch version: 2.13.0.dev20260521+cu130", "2.13.0.dev20260521+cu130", None),
        ("torch: 2.13.0.dev20260521+cu130", "2.13.0.dev20260521+cu130", None),
        ("torch==2.12.0\ntorchvision==0.27.0", "2.12.0", None),
        ("[pip3] torch==2.11.0+cu126", "2.11.0+cu126", None),
        ("torch                2.12.0", "2.12.0", None),
        ("PyTorch version: N/A\ntorch==2.10.0", "2.10.0", None),
        ("torchvision==0.27.0\npytorch-triton==3.5.0", None, None),
        ("Python version: 3.14.0 (main, Oct  7 2025) [GCC 14.2.0]", None, "3.14"),
        ("Python version: 2.7.18", None, None),
        ("torch2.13.0.dev20260521+cu130", "2.13.0.dev20260521+cu130", None),
        ("pip install https://example/torch-2.13.0.dev20260521%2Bcpu-cp312-cp312-linux_x86_64.whl",
         "2.13.0.dev20260521+cpu", "3.12"),
        # named in a sentence, as pip names the distribution (pytorch/pytorch#140884)
        ("Using the nightly release (`torch-2.6.0.dev20241115+cu124`), it fails",
         "2.6.0.dev20241115+cu124", None),
        ("torch-2.13.0.dev20260521+cpu-cp311-cp311-linux_x86_64.whl", "2.13.0.dev20260521+cpu",
         "3.11"),
        # inside a sentence (pytorch/pytorch#154342)
        ("The ranks fail when using `torch==2.7.0`.", "2.7.0", None),
    ],
)
def test_reported_versions(versions: str, torch_version: str | None, python: str | None) -> None:
    found = extract_reproducer(
        f"{FENCE}python\nimport torch\n{FENCE}\n\n### Versions\n{versions}\n"
    )
    assert (found.reported_version, found.reported_python) == (torch_version, python)


@pytest.mark.parametrize(
    ("prose", "good"),
    [
        ("This works in torch 2.12.0 but not on the nightly.", "2.12.0"),
        ("It worked fine on 2.12.1.", "2.12.1"),
        ("The code above runs fine on `torch-2.5.1`.", "2.5.1"),  # pytorch/pytorch#140884
        ("It ran fine with torch 2.5.1 last week.", "2.5.1"),
        ("It never ran fine on torch 2.5.1 either.", None),
        # pytorch/pytorch#121288
        ("confirmed that the issue doesn't happen on torch 2.2.1, it happens only on mainline, "
         "for e.g. torch wheel: torch==2.3.0.dev20240305", "2.2.1"),
        ("This does not occur with 2.5.1.", "2.5.1"),
        ("It didn’t reproduce in torch 2.4 for me.", "2.4"),
        ("It does not happen on 2 GPUs.", None),
        ("A regression from 2.12 to 2.13.", "2.12"),
        ("Worked in PyTorch 2.11.0+cu126, fails in 2.12.0.", "2.11.0+cu126"),
        ("Last known good: 2.13.0.dev20260501+cu130", "2.13.0.dev20260501+cu130"),
        ("It works with 3.11.4 but not 3.12", None),  # more likely Python
        ("It works with torch.compile(backend='eager').", None),
        ("It regressed since 2.13.0.", None),  # names the first bad one
        ("It works on 2 GPUs and with CUDA 12.4.", None),
        ("This works in eager mode.", None),
        ("On **PyTorch 2.11.0**, it works perfectly.", "2.11.0"),
        ("Only the nightly has it; v2.12 is not affected.", "2.12"),
        ("It broke after upgrading to PyTorch 2.13.0 from 2.12.1.", "2.12.1"),
        ("I upgraded from torch 2.12.1 to 2.13.0 and it broke", "2.12.1"),
        ("works on torch-nightly <= 2.13.0.dev20260403 but not after", "2.13.0.dev20260403"),
        ("Python 3.12 is not affected.", None),
        ("CUDA 12.4 is not affected.", None),
        ("Memory moved from 2.5 GB to 3 GB.", None),
        ("I switched from CUDA 12.6 to 13.0.", None),
        # real issues' words (pytorch/pytorch#96278, #179135, #193183, #161505)
        ("It works till 2.1.0.dev20230303+cpu nighlty build but it starts failing from "
         "2.1.0.dev20230304+cpu nightly build.", "2.1.0.dev20230303+cpu"),
        ("Last working nightly: 2.6.0.dev20241111. It fails on today's.", "2.6.0.dev20241111"),
        ("I checked PyTorch 2.9 and below, it works. On 2.11 it fails.", "2.9"),
        ("In pytorch `2.11` compilation worked correctly.", "2.11"),
        ("It fails with `torch 2.9 nightly` but pass with `torch 2.8`", "2.8"),
        ("Regression between 2.5.1 and 2.6.0", "2.5.1"),
        ("No issue on 2.5.1.", "2.5.1"),
        # denied: what did not work is not the good end, and a later one on the line may be
        ("It does not work with torch 2.5.1 (works in 2.4.1).", "2.4.1"),
        ("Still fails on 2.6.0.dev20241120; it never worked in 2.5.1 either.", None),
        ("this doesn't work in 2.5.1 either", None),
        ("It did not even work with torch 2.4.0.", None),
        ("In torch 2.12 it no longer works", None),
        ("In torch 2.12 never worked", None),
        ("These tests fail to pass with torch 2.9 nightly.", None),
    ],
)
def test_a_good_version_the_prose_names(prose: str, good: str | None) -> None:
    found = extract_reproducer(f"{prose}\n\n{FENCE}python\nimport torch\n{FENCE}\n")
    assert found.reported_good == good
    assert (found.good_said is not None) == (good is not None)
    # quoted as written, emphasis and code spans aside
    assert good is None or (found.good_said or "") in prose.replace("*", "").replace("`", "")


@pytest.mark.parametrize(
    ("prose", "bad", "python"),
    [
        ("It crashes on torch nightly (2.13.0.dev20260521).", "2.13.0.dev20260521", None),
        ("Works in 2.13.0.dev20260501 but fails in 2.13.0.dev20260521+cu130.",
         "2.13.0.dev20260521+cu130", None),
        ("Please note this is on python3.11.", None, "3.11"),
        ("It works on Python 3.11 and fails on Python 3.12.", None, None),
        ("See /usr/lib/python3.10/site-packages/torch-2.13.0.dev20260521.dist-info", None, None),
    ],
)
def test_what_the_prose_says_was_run(prose: str, bad: str | None, python: str | None) -> None:
    """Without a version report, a nightly or a Python the reporter names in words; never the
    one they say worked, nor two Pythons, nor a path."""
    found = extract_reproducer(f"{prose}\n\n{FENCE}python\nimport torch\n{FENCE}\n")
    assert (found.reported_version, found.reported_python) == (bad, python)


def test_a_block_introduced_as_what_works_is_not_the_reproducer() -> None:
    works = "import torch\nf = torch.compile(lambda x: x + 1)\nprint(f(torch.ones(2)))\n"
    fails = ("import torch\nf = torch.compile(lambda x: x + 1)\nf(torch.ones(2))\n"
             "assert f(torch.ones(3)).sum() == 6\n")
    body = f"A single call succeeds:\n{FENCE}python\n{works}{FENCE}\n\nTo reproduce:\n" \
           f"{FENCE}python\n{fails}{FENCE}\n"
    assert extract_reproducer(body).source == "fenced block 2 (python)"
    # what the reporter leads with wins when nothing says it works and both check a result
    checked = body.replace("print(f(torch.ones(2)))", "assert f(torch.ones(2)).sum() == 4")
    plain = checked.replace("A single call succeeds:", "First:")
    assert extract_reproducer(plain).source == "fenced block 1 (python)"
    # "works on CPU but ..." introduces the failure, not a baseline
    contrast = checked.replace("A single call succeeds:", "It works on CPU but not on CUDA:")
    assert extract_reproducer(contrast).source == "fenced block 1 (python)"
    # one that only prints gives way to one that checks
    assert extract_reproducer(body.replace("A single call succeeds:", "First:")).source == \
        "fenced block 2 (python)"


def test_a_fix_after_the_script_is_not_run_with_it() -> None:
    script = ("import torch\ndef rot(x):\n    return torch.stack([x, x])\n"
              "torch.compile(rot)(torch.ones(2))\n")
    fix = "def rot(x):\n    return torch.stack([x.clone(), x])\n"
    more = "print(rot(torch.zeros(1)))\n"
    for lead in ("No error is reported if it is changed to:", "Later:"):
        body = (f"{FENCE}python\n{script}{FENCE}\n{lead}\n{FENCE}python\n{fix}{FENCE}\n")
        assert extract_reproducer(body).source == "fenced block 1 (python)"
    # a later block that uses what the script defines still continues it
    body = f"{FENCE}python\n{script}{FENCE}\nThen:\n{FENCE}python\n{more}{FENCE}\n"
    assert extract_reproducer(body).source == "fenced blocks 1+2 (python)"


@pytest.mark.parametrize(("script", "refused"), [
    ("x = torch.ones(1).to('mps')\n", True),
    ("d = torch.device('mps:0')\nx = torch.ones(1, device=d)\n", True),
    ("torch.mps.synchronize()\n", True),
    ("if torch.backends.mps.is_available():\n    x = torch.ones(1, device='mps')\n", True),
    ("d = 'mps' if torch.backends.mps.is_available() else 'cpu'\nx = torch.ones(1, device=d)\n",
     False),
    ("if torch.backends.mps.is_available():\n    d = 'mps'\nelse:\n    d = 'cuda'\n", False),
    ("print('mps is not used here', torch.ones(1))\n", False),
])
def test_a_script_that_runs_on_apple_s_mps_is_refused(script: str, refused: bool) -> None:
    body = f"{FENCE}python\nimport torch\n{script}{FENCE}\n"
    if refused:
        with pytest.raises(UserError, match="Apple's MPS"):
            extract_reproducer(body)
    else:
        assert "torch" in extract_reproducer(body).script


def test_a_guessed_count_gives_way_to_the_one_the_issue_names() -> None:
    script = "import os\nimport torch\nrank = int(os.environ['RANK'])\nprint(rank)\n"
    found = extract_reproducer(f"{FENCE}python\n{script}{FENCE}\n")
    assert (found.processes, found.processes_guessed) == ("2", True)
    assert Reproducer.from_dict(json.loads(json.dumps(found.to_dict()))) == found
    named = extract_reproducer(f"{FENCE}python\n{script}{FENCE}\n`torchrun --nproc_per_node=4 a.py`")
    assert (named.processes, named.processes_guessed) == ("4", False)
    # a triager's reduced script in a comment, the issue's body naming the count
    from bot.core.issue_text import extract_from_comment
    body = f"Run as `torchrun --nproc_per_node=4 a.py`\n\n{FENCE}python\nimport torch\n{FENCE}\n"
    found = extract_from_comment(f"{FENCE}python\n{script}{FENCE}\n", body)
    assert found is not None and (found.processes, found.processes_guessed) == ("4", False)


def test_a_comment_s_script_that_cannot_run_is_refused_not_swapped_for_the_issue_s() -> None:
    from bot.core.issue_text import extract_from_comment
    body = f"{FENCE}python\nimport torch\nprint(torch.ones(2))\n{FENCE}\n"
    broken = f"/bisect\n{FENCE}python\nimport torch\ndef f(:\n    pass\n{FENCE}\n"
    with pytest.raises(UserError, match="The script in the comment that asked cannot be run: "
                       "I found Python code, but fenced block 1 .* does not compile"):
        extract_from_comment(broken, body)
    # a traceback or a command line in the comment is not a script: the issue's is used
    for comment in (f"/bisect\n{FENCE}\nTraceback (most recent call last):\n  File \"x\"\n"
                    f"RuntimeError: boom\n{FENCE}\n", "/bisect good=2.12.0"):
        assert extract_from_comment(comment, body) is None


def test_from_torch_import_is_a_script_that_uses_torch() -> None:
    body = f"{FENCE}python\nfrom torch import nn\nm = nn.Linear(2, 2)\nprint(m)\n{FENCE}\n"
    assert "nn.Linear" in extract_reproducer(body).script


@pytest.mark.parametrize(
    ("code", "named"),
    [
        ("x = torch.ones(2)\nprint(x)", "uses torch but never imports it: add `import torch`"),
        ("t0 = time.time()\nx = torch.ones(2)\nprint(x, time.time() - t0)",
         "uses `torch` and `time` but never imports or defines them"),
        ("m = models.resnet18()\nx = torch.randn(1, 3, 8, 8)\nprint(m(x), np.pi)",
         "uses `torch`, `models` and `np` but"),
        ("x = torch.ones(2)\nprint(a(b(c(d(e(f(g(x))))))))",
         "uses `torch`, `a`, `b`, `c`, `d` and 3 more but never"),
    ],
)
def test_a_script_without_import_torch_is_refused_naming_every_undefined_name(
        code: str, named: str) -> None:
    """#93196's script used `models` and `time` too, undefined: only torch was named."""
    with pytest.raises(UserError) as raised:
        extract_reproducer(f"{FENCE}python\n{code}\n{FENCE}\n")
    assert named in str(raised.value)


def test_an_attached_script_is_named_in_the_refusal() -> None:
    body = ("Code: see [repro.txt](https://github.com/user-attachments/files/123/repro.txt), "
            "log: [output.txt](https://github.com/user-attachments/files/124/output.txt)\n")
    with pytest.raises(UserError, match=r"attached file \(repro\.txt\)"):
        extract_reproducer(body)


def test_the_title_names_the_good_version_when_the_body_does_not() -> None:
    body = f"Compiled cumsum is off.\n\n{FENCE}python\nimport torch\n{FENCE}\n"
    title = "[inductor] wrong cumsum on nightly (worked in 2.12.0)"
    found = extract_reproducer(body, title)
    assert (found.reported_good, found.good_said) == ("2.12.0", "worked in 2.12.0")
    assert extract_reproducer(body).reported_good is None
    # the body's words come first
    found = extract_reproducer("It works in torch 2.11.0.\n\n" + body, title)
    assert found.reported_good == "2.11.0"


def test_a_good_version_in_code_or_output_is_not_the_reporter_s_word() -> None:
    found = extract_reproducer(f"{FENCE}python\nimport torch\n# works in torch 2.12.0\n{FENCE}\n"
                               f"{FENCE}\nworked in torch 2.11.0\n{FENCE}\n")
    assert found.reported_good is None


TEMPLATE = Path(__file__).resolve().parents[2] / ".github" / "ISSUE_TEMPLATE" / "bisect.yml"


def form_body(answers: dict[str, str], script: str = "import torch\nprint(1)\n") -> str:
    """An issue body as GitHub writes it from this repository's form: each question's label
    as a `### ` heading, then the answer ("_No response_" when empty), code fenced."""
    parts = []
    for item in yaml.safe_load(TEMPLATE.read_text())["body"]:
        if item["type"] == "markdown":
            continue
        label = item["attributes"]["label"]
        answer = answers.get(item["id"], "")
        if item["id"] == "reproducer":
            answer = f"{FENCE}python\n{script}{FENCE}"
        parts.append(f"### {label}\n\n{answer or '_No response_'}")
    return "\n\n".join(parts) + "\n"


def test_the_issue_form_s_answers_are_read() -> None:
    found = extract_reproducer(form_body({"good": "2.12.0", "variant": "cu126"}))
    assert dict(found.form) == {"good": "2.12.0", "variant": "cu126"}  # bad: _No response_
    assert found.script == "import torch\nprint(1)\n"
    assert Reproducer.from_dict(json.loads(json.dumps(found.to_dict()))) == found
    prose = "### Last known good version\n\n2.11.0\n\n### Notes\n\n2.10.0\n"
    assert dict(extract_reproducer(f"{prose}\n{FENCE}python\nimport torch\n{FENCE}").form) == {
        "good": "2.11.0"}


def test_an_answer_fills_what_the_command_leaves_out_and_is_checked() -> None:
    command = with_form(Command(Action.BISECT, bad="latest"),
                        {"good": "2.12.0", "bad": "2026-05-21", "variant": "CU130"})
    assert (command.good, command.bad, command.variant) == ("2.12.0", "latest", "cu130")
    with pytest.raises(UserError, match='The form.s "Last known good version" .`yesterday`.: '
                                        "give a version like"):
        with_form(Command(Action.BISECT), {"good": "yesterday"})
    assert with_form(Command(Action.BISECT), {"packages": "einops, attrs"}).packages == (
        "einops", "attrs")
    given = Command(Action.BISECT, packages=("scipy",))  # a command's with= wins
    assert with_form(given, {"packages": "einops"}).packages == ("scipy",)
    with pytest.raises(UserError, match='The form.s "Packages" .`torch`.: `torch` comes with'):
        with_form(Command(Action.BISECT), {"packages": "torch"})


def test_the_form_s_default_variant_leaves_the_variant_to_the_repository() -> None:
    """A default choice that named a variant (cu130) overrode the configured one."""
    template = yaml.safe_load((Path(__file__).resolve().parents[2] / ".github" /
                               "ISSUE_TEMPLATE" / "bisect.yml").read_text())
    (dropdown,) = [q for q in template["body"] if q.get("id") == "variant"]
    first = dropdown["attributes"]["options"][dropdown["attributes"]["default"]]
    assert first == FORM_DEFAULT
    assert with_form(Command(Action.BISECT), {"variant": first}).variant is None
    assert with_form(Command(Action.BISECT), {"variant": "cu126"}).variant == "cu126"


def test_to_dict_round_trips() -> None:
    found = extract_reproducer(f"{FENCE}py\nimport torch, numpy\nprint(torch.ones(1))\n{FENCE}")
    data = found.to_dict()
    assert set(data) >= {"script", "needs_cuda", "reported_version", "reported_python"}
    assert set(data) >= {"imports", "source"}
    assert data["imports"] == ["numpy"]
    assert Reproducer.from_dict(json.loads(json.dumps(data))) == found
    with pytest.raises(ValueError):
        Reproducer.from_dict({**data, "imports": "numpy"})


@pytest.mark.parametrize(
    ("block", "source"),
    [
        (f"{FENCE}\ncd = 2\nimport torch\nprint(torch.ones(cd))\n{FENCE}", "fenced block 1"),
        (f"{FENCE}python\npip = 2\nimport torch\nprint(torch.ones(pip))\n{FENCE}", "fenced"),
        (f"{FENCE}sh\n$ python3.12 -c 'import torch; print(torch.ones(1))'\n{FENCE}", "python -c"),
        (f'{FENCE}\n$ python -c "import torch\nprint(torch.ones(1))"\n{FENCE}', "python -c"),
    ],
)
def test_shell_words_and_commands(block: str, source: str) -> None:
    assert extract_reproducer(block).source.startswith(source)


def test_fence_in_comment_is_ignored_but_real_block_is_used() -> None:
    body = f"<!--\n{FENCE}python\nimport torch\nHIDDEN = 1\n{FENCE}\n-->\n{FENCE}python\n"
    found = extract_reproducer(body + f"import torch\nprint(torch.zeros(1))\n{FENCE}\n")
    assert "HIDDEN" not in found.script
    assert found.source == "fenced block 1 (python)"


def test_unclosed_comment_hides_the_rest() -> None:
    with pytest.raises(UserError, match="could not find"):
        extract_reproducer(f"text <!-- never closed\n{FENCE}python\nimport torch\n{FENCE}\n")


def test_hostile_lines_take_linear_time() -> None:
    bodies = [
        "#" * 200_000 + " Reproducer\n" + "# " + "#" * 200_000,
        "`" * 300_000,
        "**" * 200_000 + ":",
        "torch " + " " * 300_000 + "x",
        f"{FENCE}python\n" + "(" * 100_000 + "\n" + FENCE,
        f"{FENCE}\n" * 20_000,
        "<!--" * 100_000,
        "It works in " * 100_000 + "torch 2.12.0",
    ]
    for body in bodies:
        started = time.perf_counter()
        with contextlib.suppress(UserError):
            extract_reproducer(body)
        assert time.perf_counter() - started < 3, body[:40]


# Fuzzing: arbitrary text, and text assembled from the pieces real issues are made of.
PIECES = st.sampled_from(
    [
        FENCE,
        f"{FENCE}python",
        f"{FENCE}py",
        "~~~",
        "### Reproducer",
        "**To Reproduce**",
        "### Versions",
        "<!--",
        "-->",
        "<details>",
        "</details>",
        "import torch",
        "x = torch.randn(3, device='cuda')",
        "def f(x):",
        "    return x * 2",
        "print(torch.compile(f)(x))",
        ">>> import torch",
        "... ",
        "$ python repro.py",
        "python -c 'import torch'",
        "Traceback (most recent call last):",
        "PyTorch version: 2.13.0.dev20260521+cu130",
        "[pip3] torch==2.12.0",
        "Python version: 3.12.3 (main)",
        "from __future__ import annotations",
        "\t",
        "\r\n",
        "\x00",
        "",
    ]
)
STRUCTURED = st.lists(st.one_of(PIECES, st.text(max_size=20)), max_size=40).map("\n".join)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(text: str) -> None:
    try:
        found = extract_reproducer(text)
    except UserError as error:
        assert str(error)
        return
    compile(found.script, "<fuzz>", "exec")
    json.dumps(found.to_dict())


@FUZZ
@given(st.text())
def test_arbitrary_text_gives_a_reproducer_or_a_user_error(text: str) -> None:
    _check(text)


@FUZZ
@given(STRUCTURED)
def test_issue_like_text_gives_a_reproducer_or_a_user_error(text: str) -> None:
    _check(text)


@pytest.mark.parametrize(("script", "checks"), [
    ("import torch\nassert torch.ones(1).sum() == 1\n", True),
    ("import torch\nif torch.ones(1).sum() != 1:\n    raise RuntimeError('mismatch')\n", True),
    ("import sys, torch\nsys.exit(int(torch.ones(1).sum() != 1))\n", True),
    ("import torch\ntorch.testing.assert_close(torch.ones(1), torch.ones(1))\n", True),
    ("import numpy as np, torch\nnp.testing.assert_allclose(1.0, 1.0)\n", True),
    ("import unittest, torch\nclass T(unittest.TestCase):\n    def test(self):\n"
     "        self.assertEqual(1, 1)\n", True),
    ("import unittest, torch\nunittest.main()\n", True),
    ("import torch\nc = torch.compile(torch.sin)(torch.ones(3))\nprint((c - torch.sin("
     "torch.ones(3))).abs().max())\n", False),
    ("import torch\nif not torch.allclose(torch.ones(1), torch.zeros(1)):\n"
     "    print('mismatch!')\n", False),
    ("import torch\ndef main():\n    print(torch.ones(1))\nmain()\n", False),
    ("import torch\nprint(torch.ones(1)\n", True),  # does not parse: no verdict on it
])
def test_whether_a_reproducer_checks_its_result(script: str, checks: bool) -> None:
    assert checks_itself(script) is checks


def test_what_an_issue_s_script_installs_is_its_imports_and_torch_s_companions():
    found = extract_reproducer("```python\nimport torch, torchvision\nimport einops\nimport cv2\n"
                               "print(torch.ones(1))\n```\n")
    assert found.installs == ("einops", "opencv-python", "torchvision")
    chosen = Settings("https://i/cu130", "cu130", "3.12", 600, 1, None, None, None, False)
    plan = JobPlan("o/r", 1, 2, "run", "alice", found, chosen)
    assert plan.packages == found.installs
    named = JobPlan("o/r", 1, 2, "run", "alice", found,
                    replace(chosen, packages=("einops==0.8.1",)))
    assert named.packages == ("einops==0.8.1",)  # `with=` replaces the guess


def test_works_till_one_nightly_fails_from_the_next_gives_both_ends() -> None:
    """The nightly the prose says worked up to is the good end, not the failing build: the
    first nightly it names was taken as the one the reporter ran (pytorch/pytorch#96278)."""
    found = extract_reproducer(
        "Creating a tensor inside torch.compile works till 2.1.0.dev20230303+cpu nightly "
        "build but it starts failing from 2.1.0.dev20230304+cpu nightly build.\n\n"
        f"{FENCE}python\nimport torch\nprint(torch.ones(2))\n{FENCE}\n")
    assert (found.reported_good, found.reported_version) == (
        "2.1.0.dev20230303+cpu", "2.1.0.dev20230304+cpu")


@pytest.mark.parametrize(("script", "refused"), [
    ("import torch\ndef rope(x):\n    return torch.cos(x)\n", True),  # a library's helper
    ("def test_x(self):\n    self.assertEqual(torch.ones(1), 1)\n", True),  # a test method
    ("import torch\nN = 8\nclass M(torch.nn.Module):\n    pass\n", True),
    ("import torch\n", False),  # a crash on import is a reproducer
    ("import torch\ndef f(x):\n    return x\nif __name__ == '__main__':\n    f(1)\n", False),
    ("import torch\ndef f(x):\n    return x\nx = f(torch.ones(1))\n", False),
    ("import torch\nassert torch.ones(1).sum() == 1\n", False),
])
def test_a_script_that_only_defines_things_is_refused(script: str, refused: bool) -> None:
    """It passes on every build; an audit's issues (a vLLM helper, a unittest method) got
    "add `import torch`", after which the bot ran a script that calls nothing."""
    body = f"{FENCE}python\n{script}{FENCE}\n"
    if not refused:
        assert extract_reproducer(body).script.startswith(script.split("\n")[0])
        return
    with pytest.raises(UserError, match="but calls nothing, so it would pass on every build"):
        extract_reproducer(body)


def test_a_python_c_command_in_a_code_span_is_the_reproducer() -> None:
    """pytorch/pytorch#164297: the whole reproducer is a segfault on import, given inline,
    beside a link to the line of torch/__init__.py it suspects (not a linked script)."""
    body = ("Running `python -c 'import torch'` segfaults since the 2.9 nightly, at "
            "https://github.com/pytorch/pytorch/blob/50c0550f/torch/__init__.py#L400 I think."
            f"\n\n{FENCE}\n#0 0x00007f in ?? ()\n#1 0x00007f in PyInit__C ()\n{FENCE}\n")
    found = extract_reproducer(body)
    assert found.script == "import torch\n"
    assert found.source == "python -c command in the issue text"
    linked = "It is in https://github.com/pytorch/pytorch/blob/main/torch/_dynamo/utils.py"
    with pytest.raises(UserError) as error:
        extract_reproducer(linked)
    assert "behind a link" not in str(error.value)


SPAWNING = """import torch, torch.distributed as dist, torch.multiprocessing as mp
world_size = 8
def run(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    x = torch.ones(4, device=f"cuda:{rank}")
"""


@pytest.mark.parametrize(("script", "gpus"), [
    (SPAWNING + "mp.spawn(run, args=(world_size,), nprocs=world_size)\n", 8),
    (SPAWNING + "mp.spawn(run, (world_size,), 4)\n", 4),
    (SPAWNING + "for rank in range(world_size):\n    mp.Process(target=run, "
                "args=(rank, world_size)).start()\n", 8),
    (SPAWNING.replace('"nccl"', '"gloo"').replace('device=f"cuda:{rank}"', "")
     + "mp.spawn(run, args=(2,), nprocs=2)\n", None),  # CPU ranks: no GPU each
    (SPAWNING + "mp.spawn(run, args=(1,), nprocs=torch.cuda.device_count())\n", None),
    ("import torch\nprint(torch.ones(1).cuda())\n", None),
])
def test_the_gpus_a_script_s_own_processes_take(script: str, gpus: int | None) -> None:
    """pytorch/pytorch#154342 starts 8 NCCL ranks on cuda:{rank} itself: planned on one GPU,
    every build would fail alike (invalid device ordinal)."""
    assert spawned_gpus(script) == gpus
    found = extract_reproducer(f"{FENCE}python\n{script}{FENCE}\n")
    chosen = Settings("https://i/cu130", "cu130", "3.12", 600, 1, None, None, None, False)
    plan = JobPlan("o/r", 1, 1, "1", "a", found, chosen)
    assert plan.gpus == (gpus or 1)


@pytest.mark.parametrize(("os_line", "platform"), [
    ("OS: Microsoft Windows 11 Pro (10.0.22631 64-bit)", "Windows"),
    ("OS: macOS 14.1.1 (arm64)", "macOS"),
    ("OS: Ubuntu 22.04.4 LTS (x86_64)", None),
    ("", None),
])
def test_the_platform_collect_env_reports(os_line: str, platform: str | None) -> None:
    """pytorch/pytorch#154127 is a Windows-only compile error: on Linux builds it comes back
    "not reproduced", which the comment must explain."""
    found = extract_reproducer(f"{FENCE}python\nimport torch\nprint(1)\n{FENCE}\n\n"
                               f"### Versions\nPyTorch version: 2.7.0\n{os_line}\n")
    assert found.reported_platform == platform
    assert Reproducer.from_dict(found.to_dict()) == found


def test_a_fence_that_opens_on_a_list_item_s_line_is_a_block() -> None:
    """`1. ```python` opens a fence inside the list item (CommonMark 5.2), indented by the
    marker's width; it was read as prose, and its code lines as more prose."""
    body = (f"1. {FENCE}python\n   import torch\n   assert torch.ones(2).sum() == 2\n"
            f"   {FENCE}\n2. See above.\n")
    assert extract_reproducer(body).script == "import torch\nassert torch.ones(2).sum() == 2\n"
