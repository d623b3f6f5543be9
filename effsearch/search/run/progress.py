"""What `effsearch run` shows (README, "What the quickstart prints"): the header, one line per
finished trial, the phase's table and summary, written by ``Report`` to the stream it is given
(none: nothing is shown). The runner decides; this module only renders."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from optuna.trial import FrozenTrial, TrialState

from effsearch.config.machine import free_workers, worker_devices
from effsearch.config.metrics import target_of
from effsearch.search.results import best, cost, report
from effsearch.search.run import target
from effsearch.search.run.budget import spent
from effsearch.search.store import queries
from effsearch.search.store.attrs import REASON_KEY, TUNE_TRIAL_KEY
from effsearch.search.study import phases

if TYPE_CHECKING:
    import optuna

    from effsearch.search.run.budget import StopAtBudget
    from effsearch.search.study.spec import StudySpec

# What Optuna's ``optimize`` calls after a trial: (study, the finished trial).
Callback = Callable[["optuna.Study", FrozenTrial], Any]


class Report:
    """The lines of a run, written to ``out`` (None: a quiet run shows nothing)."""

    def __init__(self, out: TextIO | None) -> None:
        self.out = out

    def line(self, text: str = "", flush: bool = False) -> None:
        if self.out is not None:
            print(text, file=self.out, flush=flush)

    def opening(
        self,
        spec: StudySpec,
        study: optuna.Study,
        lost: list[int],
        warm: float | None,
        batches: int,
        budget: StopAtBudget | None = None,
    ) -> None:
        """What a phase says before its first trial: the header, the study file's notes, the
        warm-up (``batches`` of the baseline's config), lost trials."""
        self.line(header(spec, study, budget))
        for note in spec.notes if spec.phase != "confirm" else ():  # warm starts are queued in phase 1 only
            self.line(f"  note       {note}")
        if warm is not None:
            self.line(
                f"  warm-up    the baseline's config ran {batches} batches untimed ({warm:.1f} s), so the "
                "first timed trial is not this process's first run",
                flush=True,
            )
        if lost:
            self.line(f"  re-queued trials {lost}: their worker process is gone")

    def table(self, spec: StudySpec, study: optuna.Study) -> None:
        self.line("")
        self.line(report.status_table(study, spec.objectives, show_all=False))

    def summary(self, spec: StudySpec, study: optuna.Study, trials: list[FrozenTrial], budget: StopAtBudget) -> None:
        """What a phase says after its trials' table: the compute, the cost, what it left queued, the dashboard."""
        left = budget.left(study)
        # Phase 2 counts phase 1's trials too, as the budget and the cost line below do.
        this = spent(trials)
        earlier = cost.earlier_compute(study) if spec.phase == "confirm" else 0.0
        self.line(
            f"\ncompute: {this + earlier:.1f} s (the summed wall seconds of "
            + (
                f"both phases' trials: phase 1 {earlier:.1f} s, phase 2 {this:.1f} s)"
                if spec.phase == "confirm"
                else "this study's trials)"
            )
            + (f"; budget {budget_text(spec, '')}, {max(0.0, left):.1f} s left" if left is not None else "")
            + (
                " to phase 1 (it keeps phase 2's expected cost, at least half the budget)"
                if left is not None and spec.phase == "tune"
                else ""
            )
        )
        if spec.phase != "tune":  # phase 1's baseline is a subset's: its runs are not the user's unit
            self.line("\n".join(best.cost_of(study).lines()))
        # Phase 1's picks still queued; a queued trial of no pick (phase 2's baseline, queued again
        # after Ctrl-C or a lost worker; one a user enqueued) is not one of them.
        queued = (t.user_attrs.get(TUNE_TRIAL_KEY) for t in trials if t.state == TrialState.WAITING)
        unrun: list[int] = sorted({n for n in queued if n is not None})
        if spec.phase == "confirm" and unrun and budget.reached(study):
            self.line(
                f"phase 2 left phase 1's trials {unrun} unconfirmed (all or some of their seeds): the budget is "
                "spent; raise --budget and run again to confirm them"
            )
        warning = report.baseline_warning(trials, tune=spec.phase == "tune")
        if warning:
            self.line(f"\nwarning: {warning}")
        self.line(f"\ndashboard: {dashboard_hint(spec)}")


class Progress:
    """One line per finished trial, with the study's standing; ``callbacks`` are called with
    (study, trial) for each, as Optuna's ``optimize`` calls its own."""

    def __init__(
        self,
        spec: StudySpec,
        study: optuna.Study,
        out: Report | None = None,
        t0: float | None = None,
        callbacks: Sequence[Callback] = (),
    ) -> None:
        self.spec, self.report, self.callbacks = spec, out or Report(None), list(callbacks)
        self.t0 = t0 if t0 is not None else time.time()
        self.seen = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
        self.errors: dict[str, int] = {}  # error text -> the first trial that printed it

    def __call__(self, study: optuna.Study, trial: FrozenTrial | None = None) -> None:
        self.poll(study)

    def poll(self, study: optuna.Study) -> None:
        trials = study.get_trials(deepcopy=False)
        for t in sorted(
            (t for t in trials if t.state.is_finished() and t.number not in self.seen), key=lambda t: t.number
        ):
            reason = t.user_attrs.get(REASON_KEY) if t.state == TrialState.FAIL else None
            same = self.errors.get(reason) if reason else None
            line = report.trial_line(
                t, self.spec.objectives, trials, study, self.spec.n_trials, time.time() - self.t0, same_as=same
            )
            # Seen once shown: a Ctrl-C while its line was made (it reads the storage) had lost the line.
            self.report.line(line, flush=True)
            self.seen.add(t.number)
            if reason and same is None:
                self.errors[reason] = t.number
            for callback in self.callbacks:
                callback(study, copy.deepcopy(t))  # theirs to keep: the cached trial is not


def header(spec: StudySpec, study: optuna.Study, budget: StopAtBudget | None = None) -> str:
    """The phase's opening lines. ``budget``: phase 2's reads what phase 1 spent of the study's budget."""
    trials = study.get_trials(deepcopy=False)
    c = queries.counts(trials)
    objs = ", ".join(f"{n} ({d})" for n, d in zip(spec.objectives, spec.directions))
    count = f"{spec.n_trials} trials ({c['done']} done)" if spec.n_trials else f"{c['done']} trials done"
    timeout = f", at most {spec.timeout:g} s" if spec.timeout else ""
    if spec.budget or spec.budget_runs:
        earlier = budget.earlier() if budget is not None and spec.phase == "confirm" else 0.0
        timeout += f", budget {budget_text(spec)} ({spent(trials) + earlier:.0f} s spent"
        timeout += f", {earlier:.0f} s of it by phase 1)" if earlier else ")"
    pr = spec.pruner
    # Every knob the pruner runs with, defaults included: a default that changed (min_trials 4 -> 2)
    # shows in the header, not only in the release notes.
    knobs = pr.knobs()
    pruner = ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in knobs.items())
    phase = {"tune": "phase 1 of 2 (tune): ", "confirm": "phase 2 of 2 (confirm): "}.get(spec.phase, "")
    return "\n".join(
        [
            f"effsearch run: {phase}study {spec.name!r} from {spec.source}",
            f"  storage    {spec.storage_label()}",
            artifacts_line(spec),
            f"  objectives {objs}; target {target_text(spec)}",
            f"  space      {len(spec.space.active)} dimensions searched on {spec.space.machine.describe(spec.space.active)} "
            f"(effsearch space show {spec.source})",
            f"  sampler    {spec.sampler.name}, seed {spec.seed}; {spec.workers} worker(s); {count}{timeout}"
            if spec.phase != "confirm"
            else f"  trials     the baseline and phase 1's top {phases.picks_of(spec)} x {phases.tuning_of(spec).seeds} seed(s), "
            f"queued; {spec.workers} worker(s); {count}{timeout}",
            f"  pruner     {pr.name}"
            + (f" ({pruner})" if pruner else "")
            + (
                f"; a trial short of the target at {spec.max_slowdown:g}x the baseline's time to target stops"
                if spec.max_slowdown
                else "; max_slowdown off"
            ),
        ]
        + ([f"  tuning     {phases.summary(spec)}"] if spec.phase == "tune" else [])
        + devices_line(spec)
        + warm_line(spec)
    )


def devices_line(spec: StudySpec) -> list[str]:
    """Which GPUs each worker trains on (none on a machine without GPUs), and checkpoints."""
    lines = []
    gpus = spec.space.machine.gpus
    if gpus:
        slots = worker_devices(gpus, spec.workers, spec.devices_per_trial)
        shared = spec.workers > free_workers(gpus, spec.devices_per_trial)
        lines.append(
            f"  devices    {spec.workers} worker(s) on CUDA_VISIBLE_DEVICES {' | '.join(slots)}"
            + (" (share_devices: their trials' times are marked shared)" if shared else "")
        )
    if spec.checkpoint_every is not None:
        lines.append(f"  checkpoint every {spec.checkpoint_every:g} s of training, into the artifact folder")
    return lines


def artifacts_line(spec: StudySpec) -> str:
    """Where trials' files go, or why they keep none (the folder is made here if it can be)."""
    from effsearch.search.store.storage import artifact_problem

    problem = artifact_problem(spec)
    if problem is None:
        return f"  artifacts  {spec.artifacts}"
    return f"  artifacts  none: {problem}; trials keep no learning curve, config or result files (warning)"


def warm_line(spec: StudySpec) -> list[str]:
    if not spec.warm_start or spec.phase == "confirm":
        return []
    return [
        f"  warm start {len(spec.warm_start)} config(s) after the baseline, trained as given: "
        + ", ".join(label for label, _ in spec.warm_start)
    ]


def dashboard_hint(spec: StudySpec) -> str:
    """The command that serves this study; ``--artifact-dir`` only for a folder that is there."""
    from effsearch.search.store.urls import rdb_url, redact

    storage = redact(rdb_url(spec.storage)) if spec.is_rdb else spec.storage
    there = spec.artifacts is not None and spec.artifacts.is_dir()
    return f"optuna-dashboard {storage}" + (f" --artifact-dir {spec.artifacts}" if there else "")


def target_text(spec: StudySpec) -> str:
    """The phase's target as the header says it: a number, or relative to the baseline."""
    by = target.offset(spec)
    if by is None:  # "val accuracy 0.9" as before metric targets; "val loss <= 2" on another metric
        return target_of(phases.trial_config(spec, spec.base)).said()
    m = target_of(phases.trial_config(spec, spec.base)).m  # a loss: the offset said as the loss it adds
    return f"{m.label} the baseline's final {by if m.higher else -by:+g} (resolved when trial 0 completes)"


def budget_text(spec: StudySpec, seconds: str = "s") -> str:
    """The budget as the file gave it: compute seconds (``seconds`` names the unit) or baseline runs."""
    if spec.budget is not None:
        return f"{spec.budget:g} compute {seconds}".rstrip() if seconds else f"{spec.budget:g} s"
    return f"{spec.budget_runs:g} baseline runs"
