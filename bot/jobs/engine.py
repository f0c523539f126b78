"""The bisection loop: ask the core for probes, provision and run them, record the verdicts."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from bot.adapters.environments import Environment, IndexOutage, ProvisionError
from bot.adapters.runner import Runner, torchrun
from bot.core.bisection import Bisection
from bot.core.builds import Build
from bot.core.results import BisectResult, ProbeRecord
from bot.core.verdicts import (
    FLAKY,
    Judgement,
    Policy,
    RunResult,
    Stage,
    Verdict,
    against_signature,
    judge,
)


class Provisioner(Protocol):
    """Makes a build's environment: EnvironmentCache (nightlies), OverlayProvisioner (commits)."""

    def provision(self, build: Build, cancel: threading.Event | None = None) -> Environment:
        """Setting `cancel` makes it give up as soon as it can, raising Cancelled."""
        ...

    def using(self, build: Build, cancel: threading.Event | None = None
              ) -> contextlib.AbstractContextManager[Environment]:
        """`provision`, with the environment kept (never evicted) for the block."""
        ...


# Where a probe's runs go: entered around the runs, it gives their environment variables.
Slot = Callable[[], contextlib.AbstractContextManager[Mapping[str, str]]]


class ProbeStopped(Exception):
    """A probe called off before its verdict, because it can no longer change the outcome."""


class Prefetch(Protocol):
    """Told what runs whenever probes start, so it can make what may follow meanwhile."""

    def ahead(self, bisection: Bisection, probes: Sequence[int], width: int) -> None:
        """`probes` run now, the first started first; each verdict is taken in as it comes."""
        ...

    def ready(self) -> Collection[int]:
        """The builds whose environments are made: a split may move a little to use one."""
        ...

    def close(self) -> None: ...


class Progress(Protocol):
    """Told what the engine is doing; the CLI draws it, the Actions job writes the comment."""

    def __call__(self, event: str, **details: Any) -> None: ...


def _quiet(event: str, **details: Any) -> None:
    return None


class Memo(Protocol):
    """Probe results already known for one reproducer under one set of options (the history)."""

    def get(self, build_version: str) -> ProbeRecord | None: ...

    def put(self, record: ProbeRecord) -> None: ...


@dataclass(frozen=True)
class ProbeOptions:
    """How each build is run: deadline, repetitions, extra variables, judging policy."""

    timeout_s: float = 600.0
    repeat: int = 1
    policy: Policy = Policy()
    extra_env: Mapping[str, str] = field(default_factory=dict)
    # The variables the issue runs its script with: part of every run, unlike `extra_env`
    # (a triage variant's), which marks the records it made.
    env: Mapping[str, str] = field(default_factory=dict)
    # The processes the issue runs it on with torchrun ("2", "gpu"), or None: `python script`.
    processes: str | None = None
    # The script's own arguments (`python repro.py --size 8`): its argv in every run.
    args: tuple[str, ...] = ()


def combine_runs(judgements: Sequence[Judgement]) -> Judgement:
    """N runs of one build: unanimous is that verdict; mixed is flaky, which is SKIP."""
    verdicts = [j.verdict for j in judgements]
    if len(set(verdicts)) == 1:
        return judgements[-1]
    counts = ", ".join(f"{verdicts.count(v)} {v.value}" for v in Verdict if v in verdicts)
    return Judgement(Verdict.SKIP, f"{FLAKY}{counts} of {len(verdicts)} runs", "flaky")


@dataclass
class Prober:
    """Runs one build: provision its environment, run the reproducer `repeat` times, judge."""

    cache: Provisioner
    runner: Runner
    script: Path
    options: ProbeOptions = ProbeOptions()
    progress: Progress = _quiet
    memo: Memo | None = None  # a result it knows is never computed again
    # An index that does not answer stops the bisection (IndexOutage raised, no verdict)
    # rather than SKIP the build: where the bisection can be resumed (the local CLI).
    outage_stops: bool = False

    @contextlib.contextmanager
    def environment(
        self, build: Build, cancel: threading.Event | None = None
    ) -> Iterator[tuple[Environment | None, RunResult | None, float]]:
        """The build's environment, or why there is none, and the install's seconds; the
        environment is kept from eviction for the block (what runs in it is inside)."""
        started = time.monotonic()
        self.progress("installing", build=build)
        with contextlib.ExitStack() as stack:
            try:
                env = stack.enter_context(self.cache.using(build, cancel))
            except ProvisionError as exc:
                if cancel is not None and cancel.is_set():
                    raise ProbeStopped(build.version) from exc
                if isinstance(exc, IndexOutage) and self.outage_stops:
                    raise  # says nothing of the build: no verdict, the bisection stops
                yield None, RunResult(Stage.INSTALL, error=str(exc)), time.monotonic() - started
                return
            error = env.info.get("import_error")
            failure = RunResult(Stage.IMPORT, error=str(error)) if error else None
            yield env, failure, time.monotonic() - started

    def probe(
        self, index: int, build: Build, slot: Slot | None = None,
        cancel: threading.Event | None = None,
    ) -> tuple[Judgement, ProbeRecord]:
        """`slot` gives, held for the runs only, where they go (a GPU: its environment
        variables); unlike `extra_env` it is not recorded. The install holds none, so a
        stopped probe deleting its half-made environment keeps no GPU from the next probe.

        Setting `cancel` stops the install or the run and raises ProbeStopped; nothing of a
        stopped probe is recorded or remembered.
        """
        known = self.memo.get(build.version) if self.memo is not None else None
        if known is not None:
            self.progress("remembered", build=build, record=known)
            return self.judgement_of(known), replace(known, index=index)
        judgement, record = self._probe(index, build, slot, cancel)
        if self.memo is not None:
            self.memo.put(record)
        return judgement, record

    def judgement_of(self, record: ProbeRecord) -> Judgement:
        signature = record.signature  # as its runs were judged, kept with it
        if signature is None and record.verdict is Verdict.BAD and record.result is not None:
            # A record stored without it (by an older version): judging the last run again
            # gives it, unless the output kept was cut above the traceback (combine_runs
            # keeps the last judgement of unanimous runs; a mixed one is SKIP, which has no
            # signature that counts).
            signature = judge(record.result, self.options.policy).signature
        return Judgement(record.verdict, record.reason, signature)

    def _probe(
        self, index: int, build: Build, slot: Slot | None = None,
        cancel: threading.Event | None = None,
    ) -> tuple[Judgement, ProbeRecord]:
        with self.environment(build, cancel) as (env, failure, install_s):
            results: list[RunResult] = [failure] if failure else []
            if env is not None and failure is None:
                with slot() if slot is not None else contextlib.nullcontext({}) as slot_env:
                    run_env = {**self.options.env, **self.options.extra_env, **slot_env}
                    for attempt in range(self.options.repeat):
                        if cancel is not None and cancel.is_set():
                            break
                        self.progress("running", build=build, attempt=attempt + 1)
                        results.append(self.runner.run(
                            env.python, self.script, timeout_s=self.options.timeout_s,
                            extra_env=run_env, readonly=[env.path], cancel=cancel,
                            launcher=torchrun(self.options.processes),
                            args=self.options.args,
                        ))
        if cancel is not None and cancel.is_set():
            raise ProbeStopped(build.version)
        judgement = combine_runs([judge(r, self.options.policy) for r in results])
        record = ProbeRecord(
            index=index, version=build.version, verdict=judgement.verdict,
            reason=judgement.reason, seconds=sum(r.seconds for r in results),
            install_seconds=install_s, result=results[-1], info=dict(env.info if env else {}),
            runs=len(results), variant_env=dict(self.options.extra_env),
            metric=judgement.metric, signature=judgement.signature,
        )
        return judgement, record


@dataclass
class Engine:
    """Drives a `Bisection` over `builds` with `width` probes a round until it has an outcome."""

    builds: Sequence[Build]
    prober: Prober
    width: int = 1
    progress: Progress = _quiet
    checkpoint: Callable[[BisectResult], None] = lambda result: None
    prefetch: Prefetch | None = None  # makes the next round's environments during this one
    # One entry per worker, e.g. {"CUDA_VISIBLE_DEVICES": "1"}: a probe holds one while it runs.
    slots: Sequence[Mapping[str, str]] = ()
    # time.monotonic() at which it stops (the running probes killed) with no outcome yet: a
    # sweep's deadline, which a bisection of hanging builds ran past (a job killed uploads
    # nothing).
    deadline: float | None = None
    # Verdicts in before it starts that `start` lacks (a resumed bisection's probes that
    # ended after its last checkpoint): folded in as the engine's own are, under the
    # signature rule, never probed again.
    held: Sequence[tuple[Judgement, ProbeRecord]] = ()

    def run(self, start: BisectResult) -> BisectResult:
        try:
            return self._run(start)
        finally:
            if self.prefetch is not None:
                self.prefetch.close()

    def _run(self, start: BisectResult) -> BisectResult:
        """Keeps `width` probes running until there is an outcome.

        Each verdict is folded in as it comes (`fold_round`); then a probe still running that
        it made moot (`Bisection.needs`) is stopped, and every free worker starts the build
        that best splits what is left beside the probes still running
        (`next_probes(running=...)`), so no worker waits for a round's slowest probe.
        """
        result = start
        free: queue.Queue[Mapping[str, str]] = queue.Queue()
        for slot in self.slots:
            free.put(slot)

        @contextlib.contextmanager
        def gpu() -> Iterator[Mapping[str, str]]:
            """A free slot for one probe's runs. At most `width` probes are live and each
            holds one; a stopped one gives its slot back as soon as its run is killed."""
            slot = free.get()
            try:
                yield slot
            finally:
                free.put(slot)

        def probe(index: int, cancel: threading.Event | None) -> tuple[Judgement, ProbeRecord]:
            return self.prober.probe(index, self.builds[index], gpu if self.slots else None,
                                     cancel)

        running: dict[Future[tuple[Judgement, ProbeRecord]], tuple[int, threading.Event]] = {}
        held = list(self.held)  # verdicts in, not yet folded
        batch = 0

        def live() -> list[int]:
            return [index for index, cancel in running.values() if not cancel.is_set()]

        def fold_ready() -> None:
            """Folds in the held verdicts that wait for no other: a failure waits while a
            newer probe runs, and while the bad end (the newest testable build: the one
            whose failure is followed) has not been probed: the newest build coming back
            untestable leaves it to the next one, not to whichever older failure is in."""
            nonlocal result, held
            end = awaited_bad_end(result, held)
            pending = live() + ([end] if end is not None else [])
            ready = [pair for pair in held if not waits_for_the_signature(
                result, pair[1].index, pair[0].verdict, pending)]
            held = [pair for pair in held if pair not in ready]
            if ready:
                result = fold_round(result, ready,
                                    lambda record: self.progress("probed", record=record))
                self.checkpoint(result)

        fold_ready()

        # Room for stopped probes on their way out beside `width` running ones.
        with ThreadPoolExecutor(max_workers=2 * self.width) as pool:
            interrupted = True
            try:
                while result.outcome is None and not self._out_of_time():
                    # Held verdicts count for planning (a failure's signature can change
                    # them later, and then what they made moot is asked for again).
                    plan = fold_round(result, held).bisection if held else result.bisection
                    busy = live()
                    made = self.prefetch.ready() if self.prefetch is not None else ()
                    new = plan.next_probes(self.width, busy, made)[: self.width - len(busy)]
                    if new:
                        batch += 1
                        self.progress("round", number=batch, indices=new, result=result)
                        for index in new:
                            cancel = threading.Event()
                            future = pool.submit(probe, index, cancel)
                            running[future] = (index, cancel)
                        if self.prefetch is not None:
                            self.prefetch.ahead(plan, live(), self.width)
                    if not running:
                        break
                    finished: set[Future[tuple[Judgement, ProbeRecord]]] = set()
                    while not finished and not self._out_of_time():
                        # Not one unbounded wait: a SIGTERM that lands just before the
                        # main thread blocks has its handler (the Ctrl-C path) run only when
                        # the thread next wakes, which was a probe's end, up to --timeout on.
                        finished, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                    for future in finished:
                        _, stopped = running.pop(future)
                        with contextlib.suppress(ProbeStopped):  # stopped: it has no verdict
                            pair = future.result()
                            # One that finished as it was stopped: said to be stopped, and
                            # moot, so its verdict is not shown or folded in after all.
                            if not stopped.is_set():
                                held.append(pair)
                    fold_ready()
                    known = fold_round(result, held).bisection  # the held verdicts count too
                    for index, cancel in running.values():
                        # Looking for the fix, an older probe that held newer failures
                        # wait for decides the signature: those failures made it moot, and
                        # it was stopped for the very verdict they awaited. (A regression's
                        # signature is the bad end's, which is never moot.)
                        decides = result.bisection.find_fix and any(
                            waits_for_the_signature(result, record.index, judgement.verdict,
                                                    [index])
                            for judgement, record in held)
                        if not cancel.is_set() and not known.needs(index) and not decides:
                            cancel.set()
                            self.progress("stopped", build=self.builds[index])
                interrupted = False
            finally:
                # Probes the outcome no longer needs; or, interrupted (Ctrl-C, a runner's
                # cancel), every run still going: killed now, not at its deadline. Each is
                # told before any is reported: a report that raises (a hung-up terminal's
                # EIO) left the others to run on, and the pool waited for them.
                why = ("interrupted" if interrupted else
                       "the deadline passed" if result.outcome is None and self._out_of_time()
                       else None)
                stopping = [index for index, cancel in running.values() if not cancel.is_set()]
                for _, cancel in running.values():
                    cancel.set()
                for index in stopping:
                    self.progress("stopped", build=self.builds[index], why=why)
        self.progress("done", result=result)
        return result

    def _out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


def _passing(result: BisectResult,
             outcomes: Sequence[tuple[Judgement, ProbeRecord]]) -> Bisection:
    """The bisection with the verdicts of `outcomes` that are not failures."""
    bisection = result.bisection
    for judgement, record in outcomes:
        if judgement.verdict is not Verdict.BAD:
            bisection = bisection.record(record.index, judgement.verdict)
    return bisection


def awaited_bad_end(result: BisectResult,
                    outcomes: Sequence[tuple[Judgement, ProbeRecord]]) -> int | None:
    """The bad end a regression's failures wait for, before any defines the signature: the
    newest build not known untestable, when none of `outcomes` is its verdict. Shared with
    `bisect-bot round merge`, which holds them in the state the same way."""
    if result.signature is not None or result.bisection.find_fix:
        return None
    end = _passing(result, outcomes).bad_end_to_probe()
    if end is None or any(record.index == end for _, record in outcomes):
        return None
    return end


def waits_for_the_signature(
    result: BisectResult, index: int, verdict: Verdict, running: Sequence[int]
) -> bool:
    """A failure is held back while no failure has defined the signature yet and a probe
    that would define it before this one is still running: the newest failing build defines
    it (the oldest in find-the-fix mode), as when a whole round is folded at once."""
    if result.signature is not None or verdict is not Verdict.BAD:
        return False
    if result.bisection.find_fix:
        return any(other < index for other in running)
    return any(other > index for other in running)


def fold_round(
    result: BisectResult,
    outcomes: Sequence[tuple[Judgement, ProbeRecord]],
    on_probed: Callable[[ProbeRecord], None] = lambda record: None,
) -> BisectResult:
    """A round's verdicts folded into the result under the failure-signature rule.

    Shared by the engine and `bisect-bot round merge`, so a bisection spread over runners
    decides exactly as one on a single machine. Raises ValueError (nothing changes) when a
    build is outside the search or already has a verdict.
    """
    # The newest BAD build of the search (its bad end) defines the failure; in find-the-fix
    # mode the failing builds are the old ones, so the oldest failing run defines it.
    fix = result.bisection.find_fix
    ordered = sorted(outcomes, key=lambda pair: pair[1].index, reverse=not fix)
    bisection, signature, probes = result.bisection, result.signature, list(result.probes)
    folded: list[ProbeRecord] = []
    for judgement, record in ordered:
        if judgement.verdict is Verdict.BAD and signature is None:
            signature = judgement.signature
        final = against_signature(judgement, signature)
        record = replace(record, verdict=final.verdict, reason=final.reason)
        bisection = bisection.record(record.index, final.verdict)
        folded.append(record)
    for record in folded:
        probes.append(record)
        on_probed(record)
    return replace(result, bisection=bisection, signature=signature, probes=tuple(probes))
