"""Index pages in PyTorch's and PEP 691's forms, wheel selection, and windows."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import platform
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.core.builds import (
    Build,
    Selection,
    WheelLink,
    end_to_reach,
    find_build,
    line_before,
    parse_simple_html,
    parse_simple_json,
    reach_for,
    select_builds,
    unlisted_link,
    version_line,
    wheel_identity,
    window,
    yanked_builds,
)
from bot.core.errors import UserError

BASE = "https://download.pytorch.org/whl/nightly/cu130/torch/"

# The shape pytorch/test-infra's s3_management/manage.py writes (trimmed to a few links).
PAGE = """<!DOCTYPE html>
<html>
  <body>
    <h1>Links for torch</h1>
    <a href="/whl/nightly/cu130/torch-2.13.0.dev20260520%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl" data-dist-info-metadata="sha256=ab" data-core-metadata="sha256=ab">torch-2.13.0.dev20260520+cu130-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>
    <a href="/whl/nightly/cu130/torch-2.13.0.dev20260521%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl">torch-2.13.0.dev20260521+cu130-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>
    <a href="/whl/nightly/cu130/torch-2.13.0.dev20260521%2Bcu130-cp312-cp312-manylinux_2_28_aarch64.whl">torch-2.13.0.dev20260521+cu130-cp312-cp312-manylinux_2_28_aarch64.whl</a><br/>
    <a href="/whl/nightly/cu130/torch-2.13.0.dev20260521%2Bcu130-cp313-cp313-manylinux_2_28_x86_64.whl">torch-2.13.0.dev20260521+cu130-cp313-cp313-manylinux_2_28_x86_64.whl</a><br/>
    <a href="/whl/nightly/cu130/torch-2.13.0.dev20260522%2Bcu130-cp312-cp312-win_amd64.whl">torch-2.13.0.dev20260522+cu130-cp312-cp312-win_amd64.whl</a><br/>
    <a href="/whl/nightly/cu130/torch-2.13.0.dev20260523%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=0123">x</a><br/>
    <a href="/whl/nightly/cu130/torch-2.12.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl">torch-2.12.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>
    <a href="/whl/nightly/cu130/not-a-wheel.tar.gz">not-a-wheel.tar.gz</a><br/>
  </body>
</html>
<!--TIMESTAMP 1779999999-->
"""


def test_pytorch_index_page_links():
    links = parse_simple_html(PAGE, BASE)
    assert len(links) == 7
    first = links[0]
    assert first.filename == "torch-2.13.0.dev20260520+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert first.url.startswith("https://download.pytorch.org/whl/nightly/cu130/torch-2.13.0")
    assert "%2B" in first.url and first.has_metadata and first.sha256 is None
    assert links[5].sha256 == "0123" and not links[5].has_metadata


def test_selection_keeps_one_build_per_date_for_the_interpreter_and_platform():
    builds = select_builds(parse_simple_html(PAGE, BASE), Selection("cp312", variant="cu130"))
    assert [b.version for b in builds] == [
        "2.13.0.dev20260520+cu130", "2.13.0.dev20260521+cu130", "2.13.0.dev20260523+cu130",
    ]
    assert builds[0].date == dt.date(2026, 5, 20)
    assert all(b.variant == "cu130" for b in builds)


def test_release_channel_takes_final_versions_only():
    builds = select_builds(parse_simple_html(PAGE, BASE), Selection("cp312", channel="release"))
    assert [b.version for b in builds] == ["2.12.0+cu130"]


def test_pep691_json_page():
    page = {"meta": {"api-version": "1.1"}, "name": "torch", "files": [
        {"filename": "torch-2.13.0.dev20260520+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
         "url": "../torch-2.13.0.dev20260520%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl",
         "hashes": {"sha256": "beef"}, "core-metadata": {"sha256": "aa"}},
        {"filename": "junk", "url": "junk.txt", "hashes": {}},
    ]}
    links = parse_simple_json(json.dumps(page), "http://127.0.0.1:1/whl/nightly/cpu/torch/")
    assert links == [WheelLink(
        "torch-2.13.0.dev20260520+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "http://127.0.0.1:1/whl/nightly/cpu/torch-2.13.0.dev20260520%2Bcpu-cp311-cp311-"
        "manylinux_2_28_x86_64.whl", "beef", True,
    )]
    with pytest.raises(UserError):
        parse_simple_json("{not json", "http://x/")


YANKED_PAGE = PAGE.replace(
    '0521%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"',
    '0521%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl" data-yanked="bad wheel"').replace(
    '0523%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=0123"',
    '0523%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=0123" data-yanked')


@pytest.mark.parametrize(("pinned", "expected"), [
    ((), ["0520"]),  # a date does not pin: pip and uv skip a yanked file for `>=`, a range
    (("2026-05-21", "latest"), ["0520"]),
    (("2.13.0.dev20260521+cu130",), ["0520", "0521"]),
    ((None, "2.13.0.dev20260523"), ["0520", "0523"]),  # the public version pins as == does
])
def test_yanked_files_are_left_out_unless_an_end_names_them(pinned, expected):
    links = parse_simple_html(YANKED_PAGE, BASE)
    assert [link.yanked for link in links if link.yanked is not None] == ["bad wheel", ""]
    selection = Selection("cp312", variant="cu130")
    builds = select_builds(links, selection, pinned)
    assert [b.version[14:18] for b in builds] == expected
    assert [b.version for b in yanked_builds(links, selection)] == [
        "2.13.0.dev20260521+cu130", "2.13.0.dev20260523+cu130"]


def test_a_yanked_build_of_a_day_leaves_the_day_s_other_build():
    """Two builds of one day (the cut's day, here): the newer stands, unless it was withdrawn."""
    name = "torch-{}.dev20260521+cpu-cp312-cp312-manylinux_2_28_x86_64.whl"
    page = {"meta": {"api-version": "1.1"}, "name": "torch", "files": [
        {"filename": name.format("2.12.0"), "url": name.format("2.12.0")},
        {"filename": name.format("2.13.0"), "url": name.format("2.13.0"), "yanked": True}]}
    links = parse_simple_json(json.dumps(page), BASE)
    selection = Selection("cp312", variant="cpu")
    assert [b.version for b in select_builds(links, selection)] == ["2.12.0.dev20260521+cpu"]
    named = select_builds(links, selection, ["2.13.0.dev20260521+cpu"])
    assert [b.version for b in named] == ["2.13.0.dev20260521+cpu"]
    # a plan.json carries it to the run job as yanked
    assert Build.from_dict(json.loads(json.dumps(named[0].to_dict()))).wheel.yanked == ""


def test_a_wheel_s_identity_is_its_sha256_else_its_url_except_on_pytorch_s_server():
    """What keys the environment and wheel caches besides the version: PyTorch's nightly
    links carry no sha256 and keep the names their environments always had."""
    nightly = parse_simple_html(PAGE, BASE)[0]
    assert wheel_identity(nightly) == ""
    mirrored = WheelLink(nightly.filename, "https://mirror.example/cu130/" + nightly.filename)
    rebuilt = WheelLink(nightly.filename, "https://other.example/cu130/" + nightly.filename)
    assert wheel_identity(mirrored) != wheel_identity(rebuilt)
    assert len(wheel_identity(mirrored)) == 10
    # one sha256 is one file wherever it is; another sha256 on PyTorch's server is another
    assert wheel_identity(replace(mirrored, sha256="ab")) == wheel_identity(
        replace(rebuilt, sha256="ab")) != wheel_identity(replace(nightly, sha256="cd")) != ""


def _builds():
    return select_builds(parse_simple_html(PAGE, BASE), Selection("cp312", variant="cu130"))


@pytest.mark.parametrize(
    ("good", "bad", "expected"),
    [
        (None, None, ["0520", "0521", "0523"]),
        ("2026-05-20", "2026-05-21", ["0520", "0521"]),
        ("2.13.0.dev20260521+cu130", "latest", ["0521", "0523"]),
        ("2.13.0.dev20260521", "2026-05-22", ["0521", "0523"]),  # 05-22 is missing: next newer
        ("2026-05-19", "2026-05-21", None),
    ],
)
def test_window(good, bad, expected):
    if expected is None:
        # The builds there are named: the next try is no guess.
        with pytest.raises(UserError, match=r"no build on or before that date; the builds run "
                           r"from 2.13.0.dev20260520\+cu130 \(2026-05-20\) to "
                           r"2.13.0.dev20260523\+cu130 \(2026-05-23\)$"):
            window(_builds(), good, bad)
        return
    chosen = window(_builds(), good, bad)
    assert [b.version[14:18] for b in chosen.builds] == expected
    assert chosen.good_given == (good is not None)


@pytest.mark.parametrize("bad", ["2026-05-20", "2.13.0.dev20260520+cu130"])
def test_a_bad_end_at_or_before_the_oldest_listed_build_without_a_good_end_is_a_window(bad):
    """It was refused as 'good and bad are the same build', naming a good end nobody gave;
    the search goes back from a bad end with no good one, past the builds the index lists."""
    chosen = window(_builds(), None, bad)
    assert [b.version for b in chosen.builds] == ["2.13.0.dev20260520+cu130"]
    assert not chosen.good_given


@pytest.mark.parametrize("find_fix", [False, True])
def test_a_newer_end_before_every_build_is_not_moved_to_the_oldest(find_fix):
    """bad=2026-05-01 with builds from 2026-05-20 took the 20th, which may pass already, and
    the answer was "not reproduced". The builds are reached back for it first
    (`end_to_reach`); when none of that day is found, it is refused, not moved forward."""
    good, bad = ("2026-05-01", None) if find_fix else (None, "2026-05-01")
    side = "good" if find_fix else "bad"
    with pytest.raises(UserError, match=rf"^{side}=2026-05-01: the builds start later, from "
                       r"2.13.0.dev20260520\+cu130 \(2026-05-20\)"):
        window(_builds(), good, bad, find_fix=find_fix)
    assert end_to_reach(None, "2026-05-01", False) == ("bad", "2026-05-01")
    assert end_to_reach("2026-04-01", "2026-05-01", False) == ("good", "2026-04-01")
    assert end_to_reach("2026-05-10", "2.13.0.dev20260501+cu130", False) == (
        "bad", "2.13.0.dev20260501+cu130")  # named before the good end: refused in the window
    assert end_to_reach("latest", "2026-05-01", True) == ("bad", "2026-05-01")
    assert end_to_reach(None, "latest", False) == ("good", None)


@pytest.mark.parametrize(
    ("good", "bad", "message"),
    [
        ("2026-05-23", "2026-05-20", "newer than bad"),
        ("2026-05-21", "2026-05-21", "same build"),
        ("yesterday", None, "good=yesterday: give a version like 2.12.0"),
        ("2026-13-45", None, "good=2026-13-45: that date does not exist"),
        (None, "20260521", "bad=20260521: write dates as YYYY-MM-DD"),
    ],
)
def test_window_errors_say_what_is_wrong(good, bad, message):
    with pytest.raises(UserError, match=message):
        window(_builds(), good, bad)
    with pytest.raises(UserError, match="no builds"):
        window([], None, None)


@pytest.mark.parametrize(
    ("good", "bad", "note"),
    [
        (None, "2026-05-22", "bad=2026-05-22: no nightly of that day on the index; taking the "
         "nearest newer one, 2.13.0.dev20260523+cu130"),
        (None, "2.13.0.dev20260522", "bad=2.13.0.dev20260522: no such build on the index; "
         "taking 2.13.0.dev20260523+cu130"),
        ("2.13.0.dev20260520+cu126", None, "good=2.13.0.dev20260520+cu126: the index holds "
         "+cu130 builds, not +cu126; taking 2.13.0.dev20260520+cu130"),
    ],
)
def test_an_end_that_names_no_build_exactly_says_what_was_taken(good, bad, note):
    assert window(_builds(), good, bad).notes == (note,)
    assert window(_builds(), "2026-05-20", None).notes == ()


def test_one_build_named_for_a_command_is_that_build_or_an_error_naming_the_nearest():
    """`triage --build` of a build the index lacks triaged the nearest, and said so only in
    a note: a triage examines one exact build, so it is an error listing the nearest ones."""
    assert find_build(_builds(), "2.13.0.dev20260523+cu130") == _builds()[-1]
    assert find_build(_builds(), "2026-05-20") == _builds()[0]
    with pytest.raises(UserError) as raised:
        find_build(_builds(), "2.13.0.dev20260522")
    assert str(raised.value) == ("no such build on the index; the nearest builds on it: "
                                 "2.13.0.dev20260520+cu130, 2.13.0.dev20260521+cu130, "
                                 "2.13.0.dev20260523+cu130")
    with pytest.raises(UserError, match="no nightly of that day on the index; the nearest "
                       r"builds on it: 2.13.0.dev20260521\+cu130, 2.13.0.dev20260523\+cu130$"):
        find_build(_builds(), "2026-06-09")


def test_ends_that_meet_beyond_the_index_say_why():
    with pytest.raises(UserError, match=r"same build \(2.13.0.dev20260523\+cu130\): good="
                       r"2026-06-15: no nightly of that day on the index"):
        window(_builds(), "2026-06-15", None)
    with pytest.raises(UserError, match=r"swap them, or look for the fix \(--fix"):
        window(_builds(), "2026-05-23", "2026-05-20")


def _nightlies(*versions):
    links = [WheelLink(f"torch-{v}+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", f"{BASE}{v}")
             for v in versions]
    return select_builds(links, Selection("cp312", variant="cu130"))


@pytest.mark.parametrize(
    ("good", "bad", "expected"),
    [
        # main moves to 2.13 when release/2.12 is cut: 2.12.0's nightly is the last 2.12 one
        ("2.12.0", None, ["0315", "0402", "0520"]),
        ("2.12.1", "2026-04-02", ["0315", "0402"]),  # a patch release left main there too
        ("2.12.0rc2", None, ["0315", "0402", "0520"]),
        ("2026-01-01", "2.12.0", ["0101", "0315"]),  # a release as the bad end
        ("2026-01-01", "2.13.0+cu130", ["0101", "0315", "0402", "0520"]),
    ],
)
def test_a_release_names_the_nightly_it_was_branched_at(good, bad, expected):
    builds = _nightlies("2.12.0.dev20260101", "2.12.0.dev20260315", "2.13.0.dev20260402",
                        "2.13.0.dev20260520")
    chosen = window(builds, good, bad)
    assert [b.version[14:18] for b in chosen.builds] == expected


def test_a_release_whose_nightlies_have_not_begun_is_told_not_taken_as_the_newest():
    builds = _nightlies("2.12.0.dev20260315", "2.13.0.dev20260402", "2.13.0.dev20260520")
    with pytest.raises(UserError, match=r"bad=2.14.0: no nightly of 2.14 is on the index yet; "
                       r"the newest is 2.13.0.dev20260520\+cu130"):
        window(builds, None, "2.14.0")


def test_a_release_whose_nightlies_aged_off_the_index_says_where_the_index_starts():
    builds = _nightlies("2.13.0.dev20260402", "2.13.0.dev20260520")
    with pytest.raises(UserError, match=r"good=2.12.0: no nightly of 2.12 is listed on the index "
                       r"or left on its server.*\(2.13.0.dev20260402\+cu130, of 2026-04-02\)"):
        window(builds, "2.12.0", None)
    with pytest.raises(UserError, match="good=2.12.5: no such build on the index"):
        window(_builds_of_releases(), "2.12.5", None)


@pytest.mark.parametrize(
    ("good", "until", "release"),
    [
        (None, None, None),
        ("2026-04-02", None, None),  # listed: nothing to reach for
        ("2026-03-01", dt.date(2026, 3, 1), None),
        ("2.13.0.dev20260301+cu130", dt.date(2026, 3, 1), None),
        ("2.12.0", None, "2.12.0"),  # no 2.12 nightly is listed
        ("2.12.1", None, "2.12.1"),
        ("2.13.0", None, None),  # 2.13's last nightly is listed
        ("latest", None, None),
    ],
)
def test_a_good_end_before_the_listed_nightlies_is_reached_for(good, until, release):
    builds = _nightlies("2.13.0.dev20260402", "2.13.0.dev20260520")
    reach = reach_for(builds, good)
    if until is None and release is None:
        assert reach is None
        return
    assert reach is not None and reach.oldest == builds[0]
    assert (reach.until, str(reach.release) if reach.release else None) == (until, release)


def test_an_unlisted_nightly_is_named_as_the_index_names_its_neighbours():
    (template,) = select_builds(parse_simple_html(PAGE, BASE), Selection("cp312", "manylinux",
                                                                         variant="cu130"))[:1]
    link = unlisted_link(template, line_before(version_line(template.version)) or "",
                         dt.date(2026, 3, 9))
    assert link.filename == "torch-2.12.0.dev20260309+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert link.url == ("https://download.pytorch.org/whl/nightly/cu130/"
                        "torch-2.12.0.dev20260309%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert line_before("3.0.0") is None


def _builds_of_releases():
    return select_builds(parse_simple_html(PAGE, BASE), Selection("cp312", channel="release"))


@given(st.text(max_size=2000))
def test_parsers_never_raise_anything_but_user_error(text):
    parse_simple_html(text, BASE)
    with contextlib.suppress(UserError):
        parse_simple_json(text, BASE)


def test_the_variants_of_one_nightly_are_one_commit() -> None:
    from bot.core.builds import same_commit
    assert same_commit("2.13.0.dev20260503+cpu", "2.13.0.dev20260503+cu130")
    assert same_commit("2.13.0.dev20260503", "2.13.0.dev20260503+cu130")
    assert not same_commit("2.13.0.dev20260503+cpu", "2.13.0.dev20260504+cpu")


def _links(*names: str) -> list[WheelLink]:
    return [WheelLink(name, BASE + name) for name in names]


def test_rocm_variants_the_abi_and_the_architecture_select_the_right_wheels() -> None:
    """`+rocm6.4` was taken as variant `rocm6` (no build matched --variant rocm6.4); a cp313t
    (free-threaded) wheel counted as cp313; an aarch64 machine got x86_64 wheels."""
    links = _links(
        "torch-2.13.0.dev20260521+rocm6.4-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch-2.13.0.dev20260521+cu130-cp313-cp313t-manylinux_2_28_x86_64.whl",
        "torch-2.13.0.dev20260521+cu130-cp313-cp313-manylinux_2_28_x86_64.whl",
        "torch-2.13.0.dev20260521+cu130-cp313-cp313-manylinux_2_28_aarch64.whl",
    )
    (rocm,) = select_builds(links, Selection("cp312", variant="rocm6.4", arch="x86_64"))
    assert rocm.variant == "rocm6.4" and rocm.version == "2.13.0.dev20260521+rocm6.4"
    (x86,) = select_builds(links, Selection("cp313", variant="cu130", arch="x86_64"))
    assert x86.wheel.filename.endswith("-cp313-cp313-manylinux_2_28_x86_64.whl")
    (arm,) = select_builds(links, Selection("cp313", variant="cu130", arch="aarch64"))
    assert arm.wheel.filename.endswith("_aarch64.whl")
    assert Selection("cp312").arch == platform.machine()


def test_the_nearest_build_comes_first_and_the_same_release_before_another():
    from bot.core.builds import nearest_first

    others = ["2.13.0.dev20260501+cpu", "2.13.0.dev20260520+cpu", "2.14.0.dev20260511+cpu",
              "2.13.0", "not a version", "2.13.0.dev20260509+cpu"]
    assert nearest_first("2.13.0.dev20260510+cpu", others) == [
        "2.13.0.dev20260509+cpu", "2.13.0.dev20260501+cpu", "2.13.0.dev20260520+cpu",
        "2.13.0", "2.14.0.dev20260511+cpu"]
    # Days, not the digits of the date: 31 January is next to 1 February.
    assert nearest_first("2.13.0.dev20260201+cpu",
                         ["2.13.0.dev20260210+cpu", "2.13.0.dev20260131+cpu"])[0] == \
        "2.13.0.dev20260131+cpu"
    assert nearest_first("garbage", others) == []


def test_a_record_hash_is_pep_376_s():
    import base64
    import hashlib

    from bot.core.builds import record_hash

    data = b"import torch\n"
    expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    assert record_hash(data) == f"sha256={expected}" and "=" not in record_hash(data)[7:]
