"""plan.json: what the plan job decided, the contract the run and report jobs read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from bot.core import issue_facts
from bot.core.builds import Build, named_variant
from bot.core.commands import Command, supported_python
from bot.core.config import Config
from bot.core.errors import UserError, parse_or_malformed
from bot.core.issue_text import Reproducer

FORMAT = 1  # bumped when a field changes meaning
_CUDA = re.compile(r"cu[0-9]{2,3}")


@dataclass(frozen=True)
class Settings:
    """How to bisect: the command's options over the repository's defaults."""

    index_url: str
    variant: str
    python: str
    timeout_s: int
    repeat: int
    good: str | None
    bad: str | None
    match: str | None
    find_fix: bool
    metric: str | None = None
    threshold: float | None = None
    good_said: str | None = None  # `good` is the issue's words, not the command's option
    # The Python the issue's environment reports, when no command gave one: `python` is it,
    # or the default when the index has no builds for it.
    issue_python: str | None = None
    # The CUDA variant of the build the issue reports, when no command gave one: `variant`
    # is it, or the default when the index has no builds of it.
    issue_variant: str | None = None
    # The nightly the issue reports failing on, when neither a command nor the form gave a
    # bad end: the bad end where the index lists it (as `bisect-bot bisect` takes it).
    issue_bad: str | None = None
    packages_index: str = ""  # where the reproducer's imports come from beside torch's index
    packages: tuple[str, ...] = ()  # `with=`: installed instead of the guess from the imports
    on_timeout: str = "skip"  # `hang=bad`: a run that times out is bad


# A workflow run's page, as Actions' default variables give it (GitHub or GHES).
_RUN_URL = re.compile(r"https?://[\w.:-]+/[\w.-]+/[\w.-]+/actions/runs/\d+")


def workflow_run_link(url: str) -> str:
    """`url` where it is a workflow run's page, else "": it goes into comments as a link."""
    return url if _RUN_URL.fullmatch(url) else ""


def workflow_run_url(environ: Mapping[str, str]) -> str:
    """The page of the workflow run a job is part of, "" outside Actions."""
    server, repo, run = (environ.get(name, "") for name in
                         ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    return workflow_run_link(f"{server.rstrip('/')}/{repo}/actions/runs/{run}")


def unusable_variant(needs_cuda: bool, variant: str) -> None:
    """A CUDA reproducer cannot be tested on builds without CUDA: UserError, before any
    runner is taken for it (the plan job) or anything is installed (the run job)."""
    if needs_cuda and variant == "cpu":
        # The cpu variant may be the repository's configured default: nobody asked for it.
        raise UserError("the reproducer uses CUDA, but the builds to bisect are the cpu "
                        "variant's, which have none: give variant=cu130 (or another CUDA "
                        "variant).")


def settings(command: Command, config: Config) -> Settings:
    """Options given in the command win; the rest come from the configuration. The variant a
    command's `bad=`/`good=` version names (`+cu126`) is the command's word too."""
    variant = command.variant or named_variant(command.bad, command.good) or config.variant
    return Settings(
        index_url=config.index_for(variant),
        variant=variant,
        python=command.python or config.python,
        timeout_s=command.timeout_s or config.timeout,
        repeat=command.repeat or 1,
        good=command.good,
        bad=command.bad,
        match=command.match,
        find_fix=command.find_fix,
        metric=command.metric,
        threshold=command.threshold,
        packages_index=config.packages_index,
        packages=command.packages,
        on_timeout=command.hang or "skip",
    )


def with_issue_python(chosen: Settings, command: Command, reported: str | None) -> Settings:
    """The Python of the issue's environment (collect_env's "Python version"), when the command
    names none and the index may have builds for it (Dynamo's bytecode handling differs from
    one Python to the next, so a reproducer can fail on one only)."""
    if command.python or reported is None or not supported_python(reported):
        return chosen
    return replace(chosen, python=reported, issue_python=reported)


def issue_variant(reported_version: str | None, default: str) -> str | None:
    """The CUDA variant of the build the issue reports (`+cu126`), when the default's runners
    can run it: a CUDA variant no newer than the default's, since a driver runs builds of
    older CUDA versions and not of newer ones. A bug can depend on the CUDA version (cuBLAS,
    cuDNN), so the reporter's is the faithful one."""
    local = (reported_version or "").partition("+")[2]
    if not (_CUDA.fullmatch(local) and _CUDA.fullmatch(default)):
        return None
    # cuNNN is the CUDA version as major * 10 + minor: cu126 is 12.6, cu92 is 9.2.
    return local if local != default and int(local[2:]) <= int(default[2:]) else None


def with_issue_variant(chosen: Settings, command: Command, reported_version: str | None,
                       config: Config) -> Settings:
    """The issue's CUDA variant, when the command names none (`issue_variant`)."""
    named = command.variant or named_variant(command.bad, command.good)
    variant = None if named else issue_variant(reported_version, chosen.variant)
    if variant is None:
        return chosen
    return replace(chosen, variant=variant, index_url=config.index_for(variant),
                   issue_variant=variant)


@dataclass(frozen=True)
class JobPlan:
    """One bisection to run for an issue; `builds` is None when the run job resolves them."""

    repo: str
    issue: int
    comment_id: int  # the sticky comment the report edits
    run_id: str  # the workflow run that owns the sticky comment (a newer trigger supersedes)
    requested_by: str
    reproducer: Reproducer
    settings: Settings
    builds: tuple[Build, ...] | None = None
    good_given: bool = False
    reproducer_comment: int = 0  # the comment whose reproducer this is; 0: the issue's body
    # The comment whose command started it; 0: a label or an edit of the issue, which an
    # edit may start again (a command's options would not come with it).
    command_comment: int = 0
    # What the plan job said of the window's ends (one of the issue's it did not use, and
    # why): shown in the queued comment, and again with the answer that replaces it.
    notes: tuple[str, ...] = ()
    # That run's page (every job's log: each probe's install and output), linked from the
    # comment; "" where the plan job was not run by Actions.
    run_url: str = ""
    # The nightlies the index lists after the window's newer end (a bad end given): the
    # report says they were not tested where that end passes.
    newer_builds: int = 0

    @property
    def packages(self) -> tuple[str, ...]:
        """What every environment gets beside the build: what `with=` names, else what the
        reproducer imports (a guess from module names, which `with=` corrects)."""
        return self.settings.packages or self.reproducer.installs

    @property
    def gpus(self) -> int:
        """The GPUs one probe needs: a GPU a process for a CUDA reproducer run with torchrun
        on a count of them; one otherwise (the workflow picks the runner by it)."""
        cuda = self.reproducer.needs_cuda or self.settings.variant.startswith("cu")
        return (issue_facts.gpus_needed(self.reproducer.processes, self.reproducer.script)
                if cuda else 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "repo": self.repo, "issue": self.issue,
            "comment_id": self.comment_id, "run_id": self.run_id,
            "requested_by": self.requested_by, "reproducer": self.reproducer.to_dict(),
            "settings": dict(vars(self.settings)),
            "builds": None if self.builds is None else [b.to_dict() for b in self.builds],
            "good_given": self.good_given, "reproducer_comment": self.reproducer_comment,
            "command_comment": self.command_comment, "notes": list(self.notes),
            "newer_builds": self.newer_builds, "run_url": self.run_url,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobPlan:
        """The inverse of to_dict; a damaged plan raises MalformedError (a UserError)."""
        return parse_or_malformed("plan.json", cls._from_dict, data)

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> JobPlan:
        if data.get("format") != FORMAT:
            raise ValueError(f"plan format {data.get('format')!r}, expected {FORMAT}")
        builds = data.get("builds")
        return cls(
            repo=str(data["repo"]), issue=int(data["issue"]),
            comment_id=int(data["comment_id"]), run_id=str(data["run_id"]),
            requested_by=str(data["requested_by"]),
            reproducer=Reproducer.from_dict(data["reproducer"]),
            settings=Settings(**{**data["settings"],
                                 "packages": tuple(data["settings"].get("packages", ()))}),
            builds=None if builds is None else tuple(Build.from_dict(b) for b in builds),
            good_given=bool(data.get("good_given")),
            reproducer_comment=int(data.get("reproducer_comment") or 0),
            command_comment=int(data.get("command_comment") or 0),
            notes=tuple(str(note) for note in data.get("notes") or ()),
            newer_builds=int(data.get("newer_builds") or 0),
            run_url=workflow_run_link(str(data.get("run_url") or "")),
        )
