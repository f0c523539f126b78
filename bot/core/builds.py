"""Index pages to wheel links to builds: one per nightly date, selected and windowed."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import platform
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from urllib.parse import quote, unquote, urljoin, urlsplit

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from bot.core.errors import UserError

# The variants of PyTorch's wheel indexes and local version labels (`+cu130`, `+rocm6.4`).
VARIANT = re.compile(r"cpu|cu[0-9]{2,3}|rocm[0-9]+\.[0-9]+(?:\.[0-9]+)?|xpu")
# A nightly's local version carries the variant (`+cu130`) and its dev segment the UTC build date
# (`.dev20260521`); see the wheel names under download.pytorch.org/whl/nightly/<variant>/torch/.
_DEV_DATE = re.compile(r"^(\d{4})(\d{2})(\d{2})$")
_DATE_ARG = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class WheelLink:
    """One file on a simple index page (PEP 503 anchor or PEP 691 file entry)."""

    filename: str
    url: str
    sha256: str | None = None  # nightly links carry none; releases on PyPI do
    has_metadata: bool = False  # PEP 658/714: `<url>.metadata` can be fetched on its own
    # PEP 592: the file was withdrawn (yanked), with the index's reason ("" when it gives
    # none); None when it was not. pip and uv skip it unless a pin names its version exactly.
    yanked: str | None = None


# PyTorch's own server: its nightly links carry no sha256, so a file there is known by its
# name alone, as the environment cache has always known it (`wheel_identity`).
PYTORCH_HOST = "download.pytorch.org"


def wheel_identity(link: WheelLink) -> str:
    """What tells this file from another of the same name, for the caches keyed by it: a short
    hash of its sha256 where the index gives one, else of its URL (a mirror, a rebuilt wheel
    elsewhere); "" for a file of PyTorch's own server without one, whose environments keep
    the names they had (a nightly there is never rebuilt under the same version)."""
    if link.sha256:
        basis = f"sha256:{link.sha256}"
    elif urlsplit(link.url).hostname == PYTORCH_HOST:
        return ""
    else:
        basis = link.url
    return hashlib.sha256(basis.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Build:
    """One installable torch build: a nightly (dated) or a release, for one variant and tag."""

    version: str  # the exact version to pin, local label included: 2.13.0.dev20260521+cu130
    date: dt.date | None
    variant: str | None
    wheel: WheelLink
    python: str | None = None  # an existing interpreter that already has this build installed

    @property
    def label(self) -> str:
        return self.version

    def to_dict(self) -> dict[str, object]:
        wheel: dict[str, object] = {
            "filename": self.wheel.filename,
            "url": self.wheel.url,
            "sha256": self.wheel.sha256,
            "has_metadata": self.wheel.has_metadata,
        }
        if self.wheel.yanked is not None:  # only a build named exactly is one
            wheel["yanked"] = self.wheel.yanked
        return {
            "version": self.version,
            "date": self.date.isoformat() if self.date else None,
            "variant": self.variant,
            "wheel": wheel,
            "python": self.python,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Build:
        wheel = data["wheel"]
        assert isinstance(wheel, dict)
        date = data.get("date")
        variant = data.get("variant")
        python = data.get("python")
        return cls(
            version=str(data["version"]),
            date=dt.date.fromisoformat(date) if isinstance(date, str) else None,
            variant=variant if isinstance(variant, str) else None,
            wheel=WheelLink(
                filename=str(wheel["filename"]),
                url=str(wheel["url"]),
                sha256=wheel.get("sha256"),
                has_metadata=bool(wheel.get("has_metadata")),
                yanked=wheel["yanked"] if isinstance(wheel.get("yanked"), str) else None,
            ),
            python=python if isinstance(python, str) else None,
        )


class _AnchorParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open, self._text = dict(attrs), []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.anchors.append((self._open, "".join(self._text).strip()))
            self._open = None


def _link(href: str, base_url: str, text: str, has_metadata: bool,
          yanked: str | None = None) -> WheelLink | None:
    url, _, fragment = urljoin(base_url, href).partition("#")
    filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1]) or text
    if not filename.endswith(".whl"):
        return None
    sha = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
    return WheelLink(filename=filename, url=url, sha256=sha, has_metadata=has_metadata,
                     yanked=yanked)


def parse_simple_html(text: str, base_url: str) -> list[WheelLink]:
    """Wheel links of a PEP 503 page, as PyTorch's index generator writes them.

    pytorch/test-infra s3_management/manage.py writes absolute hrefs with `+` quoted as `%2B`,
    `#sha256=` only where a checksum is known, and for PEP 658 both `data-dist-info-metadata`
    and its PEP 714 name `data-core-metadata`. PEP 592 marks a withdrawn file with
    `data-yanked`, its value the reason (empty, or no value at all, when none is given).
    """
    parser = _AnchorParser()
    parser.feed(text)
    links = []
    for attrs, anchor_text in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        meta = attrs.get("data-core-metadata") or attrs.get("data-dist-info-metadata")
        yanked = (attrs["data-yanked"] or "") if "data-yanked" in attrs else None
        link = _link(href, base_url, anchor_text, has_metadata=bool(meta) and meta != "false",
                     yanked=yanked)
        if link is not None:
            links.append(link)
    return links


def parse_simple_json(text: str, base_url: str) -> list[WheelLink]:
    """Wheel links of a PEP 691 `application/vnd.pypi.simple.v1+json` project page. Its
    `yanked` is true, or a string, the reason, for a withdrawn file (PEP 592)."""
    try:
        data = json.loads(text)
        files = data["files"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"the index at {base_url} sent a JSON page that is not PEP 691") from exc
    links = []
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, dict) or "url" not in entry:
            continue
        meta = entry.get("core-metadata", entry.get("dist-info-metadata", False))
        yanked = entry.get("yanked", False)
        link = _link(str(entry["url"]), base_url, str(entry.get("filename", "")), bool(meta),
                     yanked if isinstance(yanked, str) else "" if yanked is True else None)
        hashes = entry.get("hashes") if isinstance(entry.get("hashes"), dict) else {}
        if link is not None:
            sha = hashes.get("sha256") if isinstance(hashes, dict) else None
            links.append(replace(link, sha256=sha or link.sha256))
    return links


# The nightly branch of pytorch/pytorch: each commit's subject reads
# `YYYY-MM-DD nightly release (<main sha>)`, and torch.version.git_version names that commit.
_NIGHTLY_SUBJECT = re.compile(
    r"^\d{4}-\d{2}-\d{2} nightly release \((?P<sha>[0-9a-f]{7,40})\)\s*$"
)


def main_sha_of_nightly(message: str) -> str | None:
    """The main-branch sha a nightly-branch commit stands for (from its subject), or None."""
    lines = message.strip().splitlines()
    match = _NIGHTLY_SUBJECT.match(lines[0]) if lines else None
    return match["sha"] if match else None


def same_commit(one: str, other: str) -> bool:
    """Whether two build versions are one nightly in different variants (their local labels
    aside): `2.13.0.dev20260503+cpu` and `...0503+cu130` are built from one commit."""
    return one.partition("+")[0] == other.partition("+")[0]


def existing_build(python: str, version: str) -> Build:
    """A build that is an interpreter someone already installed torch into (a cluster's module,
    a conda prefix, the GPU machine's own Python): nothing to download or install."""
    try:
        date = nightly_date(Version(version))
    except InvalidVersion:
        date = None
    local = version.partition("+")[2] or None
    return Build(version, date, local, WheelLink("", f"file://{python}"), python=python)


def record_hash(data: bytes) -> str:
    """A wheel RECORD's hash of `data` (PEP 376, PEP 427): sha256, urlsafe base64, unpadded."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def nearest_first(version: str, others: Iterable[str]) -> list[str]:
    """`others` ordered by how near each build is to `version`'s: the same release first,
    then by days between the nightlies (a release's own build counts as day 0); versions
    that do not parse are left out. An environment derived from the nearest build shares the
    most files with it."""
    def key(text: str) -> tuple[tuple[int, ...], int] | None:
        try:
            parsed = Version(text)
        except InvalidVersion:
            return None
        day = nightly_date(parsed)
        return parsed.release, day.toordinal() if day else 0

    mine = key(version)
    if mine is None:
        return []
    ranked = [(int(theirs[0] != mine[0]), abs(theirs[1] - mine[1]), other)
              for other in others if (theirs := key(other)) is not None]
    return [other for *_, other in sorted(ranked)]


def nightly_date(version: Version) -> dt.date | None:
    """The UTC build date of a nightly (`2.13.0.dev20260521`), or None for a release."""
    if version.dev is None:
        return None
    match = _DEV_DATE.match(str(version.dev))
    if not match:
        return None
    try:
        return dt.date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


@dataclass(frozen=True)
class Selection:
    """Which wheels of a page are builds for us: variant, interpreter and platform."""

    python_tag: str  # cp312
    platform_prefix: str = "manylinux"  # matches manylinux_2_28_x86_64, manylinux2014_x86_64
    # This machine's: a GH200's runner installs aarch64 wheels (`platform.machine()` names the
    # architecture as wheel tags do on Linux: x86_64, aarch64).
    arch: str = field(default_factory=platform.machine)
    variant: str | None = None  # cpu, cu130, rocm6.4; None accepts any (releases on PyPI)
    channel: str = "nightly"  # nightly: dev builds only; release: final versions only


def _wheel_matches(tags: Iterable[Tag], selection: Selection) -> bool:
    for tag in tags:
        # cp313 with the cp313 ABI: not cp313t, the free-threaded build, which a standard
        # CPython cannot install.
        python_ok = tag.interpreter in (selection.python_tag, "py3") and tag.abi in (
            selection.python_tag, "abi3", "none")
        platform_ok = tag.platform == "any" or (
            tag.platform.startswith(selection.platform_prefix)
            and tag.platform.endswith(selection.arch)
        )
        if python_ok and platform_ok:
            return True
    return False


def variant_of(local: str | None) -> str | None:
    """The variant of a local version label: `cu130`, `rocm6.4` (not `rocm6`: the label's
    dots are the version's), `cpu`; an unknown label's first part."""
    if not local:
        return None
    known = VARIANT.match(local)
    return known[0] if known else local.split(".")[0]


def select_builds(links: Iterable[WheelLink], selection: Selection,
                  pinned: Iterable[str | None] = ()) -> list[Build]:
    """The builds on a page for `selection`, oldest first, one per nightly date (the newest).

    A yanked file (PEP 592) is left out, as pip and uv leave it, unless one of `pinned` (the
    good and bad ends a user gave) names its version exactly: they install a yanked file that
    a `==` pin names, and a user who names the build wants that one tested."""
    wanted = [spec for spec in pinned if spec]
    by_key: dict[object, tuple[Version, Build]] = {}
    for version, build in _matching(links, selection):
        if build.wheel.yanked is not None and not any(
                names_exactly(spec, build.version) for spec in wanted):
            continue
        # Several builds on one date happen (re-runs); the newest version of the day stands.
        key: object = build.date if build.date is not None else version.public
        if key not in by_key or by_key[key][0] < version:
            by_key[key] = (version, build)
    return [build for _, build in sorted(by_key.values(), key=lambda item: item[0])]


def yanked_builds(links: Iterable[WheelLink], selection: Selection) -> list[Build]:
    """The builds for `selection` that the page marks as yanked, oldest first."""
    found = [(version, build) for version, build in _matching(links, selection)
             if build.wheel.yanked is not None]
    return [build for _, build in sorted(found, key=lambda item: item[0])]


def names_exactly(spec: str, version: str) -> bool:
    """Whether an end (`--good`, `bad=`) pins `version` as `==` would: the full version, or
    its public part (`2.13.0.dev20260521` for `2.13.0.dev20260521+cu130`); not a date."""
    try:
        wanted = parse_end(spec)
    except UserError:
        return False
    if not isinstance(wanted, Version):
        return False
    built = Version(version)
    return built == wanted or (not wanted.local and built.public == str(wanted))


def _matching(links: Iterable[WheelLink],
              selection: Selection) -> Iterator[tuple[Version, Build]]:
    """Every torch build on a page for `selection`, yanked or not, in page order."""
    for link in links:
        try:
            name, version, _, tags = parse_wheel_filename(link.filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue  # foreign files on a page are not ours to judge
        if name != "torch" or not _wheel_matches(tags, selection):
            continue
        variant = variant_of(version.local)
        if selection.variant is not None and variant != selection.variant:
            continue
        wanted_kind = version.is_devrelease if selection.channel == "nightly" else (
            not version.is_prerelease
        )
        if wanted_kind:
            yield version, Build(str(version), nightly_date(version), variant, link)


def page_offers(links: Iterable[WheelLink]) -> str:
    """What torch wheels a page has, for a "no builds" message to say what to ask for
    instead: "it lists torch wheels of cu130 for cp310, cp312 on x86_64 (nightlies)"."""
    variants, pythons, arches, kinds = set(), set(), set(), set()
    for link in links:
        try:
            name, version, _, tags = parse_wheel_filename(link.filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name != "torch":
            continue
        variants.add(variant_of(version.local) or "no variant")
        kinds.add("nightlies" if version.is_devrelease else
                  "pre-releases" if version.is_prerelease else "releases")
        for tag in tags:
            pythons.add(tag.interpreter if tag.abi in (tag.interpreter, "abi3", "none")
                        else tag.abi)  # cp313t: the free-threaded ABI, named as such
            arches.add(_platform_name(tag.platform))
    if not variants:
        return "it lists no torch wheels"
    return (f"it lists torch wheels of {', '.join(sorted(variants))} for "
            f"{', '.join(sorted(pythons))} on {', '.join(sorted(arches))} "
            f"({', '.join(sorted(kinds))})")


def _platform_name(platform: str) -> str:
    """`manylinux_2_28_x86_64` as "Linux x86_64", `win_amd64` as "Windows amd64"."""
    system = next((name for prefix, name in (("manylinux", "Linux"), ("musllinux", "Linux musl"),
                                             ("linux", "Linux"), ("macosx", "macOS"),
                                             ("win", "Windows")) if platform.startswith(prefix)),
                  None)
    arch = next((arch for arch in ("x86_64", "aarch64", "arm64", "amd64", "ppc64le", "s390x",
                                   "universal2") if platform.endswith(arch)), None)
    return f"{system} {arch}" if system and arch else platform


def parse_end(spec: str) -> str | dt.date | Version:
    """What a good or bad end names: 'latest', a real YYYY-MM-DD date, or a PEP 440 version.

    Both `--good`/`--bad` and a comment's `good=`/`bad=` are checked with it before the index
    is read, so a typo is answered at once. The message says what to write instead.
    """
    if spec.lower() == "latest":
        return "latest"
    if _DATE_ARG.fullmatch(spec):
        try:
            return dt.date.fromisoformat(spec)
        except ValueError:
            raise UserError("that date does not exist.") from None
    try:
        version = Version(spec)
    except InvalidVersion:
        raise UserError("give a version like 2.12.0, a date like 2026-05-21, or latest.") from None
    if version.release[0] >= 1000:  # 20260521 parses as a version, but means a date
        raise UserError("write dates as YYYY-MM-DD, e.g. 2026-05-21.")
    return version


def named_variant(*ends: str | None) -> str | None:
    """The variant the first of `ends` that names one names (`2.13.0.dev20260521+cu126`)."""
    tags = [end.partition("+")[2] for end in ends if end]
    return next((tag for tag in tags if VARIANT.fullmatch(tag)), None)


def _find(builds: Sequence[Build], spec: str, side: str, older: bool | None = None) -> int:
    """Index of the build `spec` names: a full version, a public version, a date, or latest.
    `side` names the option in messages; a date missing from the index takes the nearest
    build outward, older for the `older` end (default: the good one) and newer for the other,
    so the window never shrinks past what was asked."""
    older = side == "good" if older is None else older
    try:
        wanted = parse_end(spec)
    except UserError as error:
        raise UserError(f"{side}={spec}: {error}") from None
    if isinstance(wanted, str):
        return len(builds) - 1
    if isinstance(wanted, dt.date):
        return _nearest_by_date(builds, wanted, f"{side}={spec}", older)
    for index, build in enumerate(builds):
        version = Version(build.version)
        if version == wanted or (not wanted.local and version.public == spec):
            return index
    date = nightly_date(wanted)
    if date is not None:
        return _nearest_by_date(builds, date, f"{side}={spec}", older)
    if not wanted.is_devrelease:
        return _branch_point(builds, wanted, f"{side}={spec}")
    raise UserError(f"{side}={spec}: no such build on the index")


def find_build(builds: Sequence[Build], spec: str) -> Build:
    """The build `spec` names as `--good`/`--bad` do (a version, a date, latest, a release),
    for commands that examine that one build (`triage --build`): where the index has no build
    that is exactly `spec`, an error that lists the nearest, not the nearest taken in its place
    (an end of a bisection may step outward; a triage of another build answers another
    question)."""
    try:
        index = _find(builds, spec, "good")
    except UserError as error:  # "good=SPEC: why": the why alone, the caller names the option
        raise UserError(str(error).split(": ", 1)[-1]) from None
    note = _taken(builds, index, spec, "good")
    if note is None:
        return builds[index]
    why = note.split(": ", 1)[-1].split("; taking", 1)[0]
    nearest = ", ".join(build.version for build in builds[max(index - 1, 0):index + 3])
    raise UserError(f"{why}; the nearest builds on it: {nearest}")


def _branch_point(builds: Sequence[Build], release: Version, named: str) -> int:
    """The nightly a release (2.12.0, 2.12.1, 2.12.0rc2) left main at, among nightlies.

    PyTorch cuts `release/X.Y` from main and then moves main's version to the next minor
    (RELEASE.md, "Cutting release branches"), so main's nightlies go from X.Y.0.devDATE to
    X.(Y+1).0.devDATE there: the newest X.Y.0.dev nightly is the nearest to the release's
    code (the release branch then takes only cherry-picks).
    """
    line = Version(version_line(str(release)))
    nightlies = [(i, b) for i, b in enumerate(builds) if Version(b.version).is_devrelease]
    before = [i for i, b in nightlies if Version(b.version) < line]
    if before and Version(builds[before[-1]].version).release[:2] == release.release[:2]:
        return before[-1]
    if before:  # only older lines: this release's nightlies have not begun
        raise UserError(f"{named}: no nightly of {release.major}.{release.minor} is on the "
                        f"index yet; the newest is {builds[before[-1]].version}")
    if not nightlies:
        raise UserError(f"{named}: no such build on the index")
    oldest = nightlies[0][1]
    raise UserError(
        f"{named}: no nightly of {release.major}.{release.minor} is listed on the index or left "
        f"on its server; give a date or a version from its oldest on ({oldest.version}, of "
        f"{oldest.date})"
    )


def _nearest_by_date(builds: Sequence[Build], wanted: dt.date, named: str, older: bool) -> int:
    """`named` is the end as it was given (`bad=2.13.0.dev20990101+cpu`): a nightly's version
    names its date, which the messages add, never put in its place."""
    day = "that date" if named.endswith(wanted.isoformat()) else f"its date, {wanted}"
    # A date can be missing for a variant; the older end takes the nearest older build, the
    # newer end the nearest newer one, so the window never shrinks past what the user asked for.
    dated = [(i, b.date) for i, b in enumerate(builds) if b.date is not None]
    if older:
        before = [i for i, date in dated if date <= wanted]
        if before:
            return before[-1]
    else:
        newer = [i for i, date in dated if date >= wanted]
        # A day missing is taken from the next one; a date before every build is not: its
        # nightly is older than what the index has, and the oldest one may already be fixed.
        if newer and dated[0][1] <= wanted:
            return newer[0]
        if newer:
            oldest = builds[dated[0][0]]
            raise UserError(f"{named}: the builds start later, from {oldest.version} "
                            f"({oldest.date}), and no build of {day} or before it was found; a "
                            "later nightly is not taken in its place")
    if not dated:
        raise UserError(f"{named}: no build on or {_beyond(older)} {day}")
    # Named, so the next try is not a guess (after "give a good end from D on", a date past
    # D that no wheel was left for said only this).
    first, last = builds[dated[0][0]], builds[dated[-1][0]]
    raise UserError(f"{named}: no build on or {_beyond(older)} {day}; "
                    f"the builds run from {first.version} ({first.date}) to {last.version} "
                    f"({last.date})")


@dataclass(frozen=True)
class Reach:
    """A good end older than the index's oldest nightly, which the index no longer lists.

    The nightly index lists only the newest 60 versions of torch, about two
    months, but the older wheels often stay where they were. They are looked for by the name
    they would have: `oldest`'s, with another date, and the version line of that date.
    """

    oldest: Build  # the oldest nightly listed: its tags and URL name the older ones
    until: dt.date | None = None  # back to this date (a date or a dated version was given)
    release: Version | None = None  # or back to the nightly this release left main at


def reach_for(builds: Sequence[Build], good: str | None) -> Reach | None:
    """Whether `good` lies before every nightly in `builds`, and how far back it goes."""
    nightlies = [b for b in builds if b.date is not None and Version(b.version).is_devrelease]
    if good is None or not nightlies:
        return None
    oldest = nightlies[0]
    assert oldest.date is not None
    wanted: str | dt.date | Version | None = parse_end(good)
    if isinstance(wanted, Version):
        if not wanted.is_devrelease:  # a release: its line's last nightly, if none is listed
            line = Version(version_line(str(wanted)))
            listed = any(Version(b.version) < line for b in nightlies)
            return None if listed else Reach(oldest, release=wanted)
        wanted = nightly_date(wanted)
    if isinstance(wanted, dt.date) and wanted < oldest.date:
        return Reach(oldest, until=wanted)
    return None


def version_line(version: str) -> str:
    """`2.13.0` for any 2.13 build: what main's nightlies are called between two cuts."""
    parsed = Version(version)
    return f"{parsed.major}.{parsed.minor}.0"


def line_before(line: str) -> str | None:
    """The version line main had before the cut that started `line` (None before X.0)."""
    parsed = Version(line)
    return f"{parsed.major}.{parsed.minor - 1}.0" if parsed.minor > 0 else None


def unlisted_link(template: Build, line: str, day: dt.date) -> WheelLink:
    """The link `line`'s nightly of `day` would have had on the page `template` is from: the
    same project, variant, tags and folder, another version."""
    local = f"+{template.variant}" if template.variant else ""
    tags = template.wheel.filename.split("-", 2)[2]  # cp312-cp312-manylinux_2_28_x86_64.whl
    filename = f"torch-{line}.dev{day:%Y%m%d}{local}-{tags}"
    return WheelLink(filename, urljoin(template.wheel.url, quote(filename)))


def _beyond(older: bool) -> str:
    return "before" if older else "after"


@dataclass(frozen=True)
class Window:
    """The builds to bisect over, oldest first, and whether the oldest is a user's good bound."""

    builds: tuple[Build, ...]
    good_given: bool  # the older end was given (with --fix, the failing build): no search back
    notes: tuple[str, ...] = ()  # an end that named no build exactly, and what was taken
    # Builds the index lists after the newer end: a window's newest build that passes says
    # nothing of them (no "maybe already fixed" when they were never tested).
    newer: int = 0


def _taken(builds: Sequence[Build], index: int, spec: str, side: str,
           older: bool | None = None) -> str | None:
    """What to say when `side=spec` named no build exactly and `builds[index]` stands for it
    (a day with no nightly, a version not on the index, another variant's build)."""
    older = side == "good" if older is None else older
    build = builds[index]
    try:
        wanted = parse_end(spec)
    except UserError:
        return None
    if isinstance(wanted, str):
        return None
    if isinstance(wanted, dt.date):
        if build.date == wanted:
            return None
        return (f"{side}={spec}: no nightly of that day on the index; taking the nearest "
                f"{'older' if older else 'newer'} one, {build.version}")
    version = Version(build.version)
    if version == wanted or (not wanted.local and version.public == spec):
        return None
    if wanted.local and version.public == wanted.public:
        return (f"{side}={spec}: the index holds +{version.local} builds, not "
                f"+{wanted.local}; taking {build.version}")
    return f"{side}={spec}: no such build on the index; taking {build.version}"


def end_to_reach(good: str | None, bad: str | None, find_fix: bool) -> tuple[str, str | None]:
    """Which end the builds must reach back to, and its name: the older end, or the newer one
    when it names an earlier day (or no older end is given). A `bad` end older than the index's
    listed nightlies was moved to the oldest listed one, which may pass already."""
    names = ("bad", "good") if find_fix else ("good", "bad")
    older, newer = window_ends(good, bad, find_fix)
    first, second = _day_of(older), _day_of(newer)
    if second is not None and (older is None or (first is not None and second < first)):
        return names[1], newer
    return names[0], older


def _day_of(spec: str | None) -> dt.date | None:
    try:
        wanted = parse_end(spec) if spec else None
    except UserError:
        return None
    if isinstance(wanted, dt.date):
        return wanted
    return nightly_date(wanted) if isinstance(wanted, Version) else None


def window_ends(good: str | None, bad: str | None, find_fix: bool) -> tuple[str | None, str | None]:
    """The older and the newer end of a window, from the builds a user names as good (it
    passes) and bad (it fails): in a search for a regression the good build is the older end;
    in a search for the fix (`find_fix`) the bad one is, and the good one (default: the
    latest) the newer."""
    return (bad, good) if find_fix else (good, bad)


def window(builds: Sequence[Build], good: str | None, bad: str | None,
           find_fix: bool = False) -> Window:
    """Cut the builds between the older end (optional) and the newer one (default: latest),
    both inclusive: `good` and `bad` as `window_ends` orders them. Before, a search for the
    fix took `good` as the older end too, so `--fix --bad <where it failed>` was refused
    or searched the wrong side of it."""
    if not builds:
        raise UserError("the index lists no builds for this variant and Python version")
    old_name, new_name = ("bad", "good") if find_fix else ("good", "bad")
    old_spec, new_spec = window_ends(good, bad, find_fix)
    new_index = _find(builds, new_spec or "latest", new_name, older=False)
    old_index = _find(builds, old_spec, old_name, older=True) if old_spec else 0
    notes = tuple(note for note in (
        _taken(builds, old_index, old_spec, old_name, older=True) if old_spec else None,
        _taken(builds, new_index, new_spec, new_name, older=False) if new_spec else None)
        if note)
    why = "".join(f"; {note}" for note in notes)
    if old_index > new_index:
        old, new = builds[old_index].version, builds[new_index].version
        raise UserError(
            f"bad ({old}) is newer than good ({new}){why}: looking for the fix, the failing "
            "build is the older end; swap them, or look for what broke it (without --fix; "
            "`fix` in a command)" if find_fix else
            f"good ({old}) is newer than bad ({new}){why}: swap them, or look for the fix "
            "(--fix; `fix` in a command)"
        )
    if old_index == new_index and old_spec is not None:  # no older end: it searches back
        ends = (f"the index's builds run from {builds[0].version} to {builds[-1].version}"
                if not why else why[2:])
        raise UserError(f"good and bad are the same build ({builds[new_index].version}): {ends}")
    return Window(tuple(builds[old_index : new_index + 1]), good_given=old_spec is not None,
                  notes=notes, newer=len(builds) - 1 - new_index)
