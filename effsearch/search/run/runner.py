"""`effsearch run`: a study (or its two phases) from the pre-flight to the final table.

The jobs live beside it: ``objective.py`` (one trial), ``workers.py`` (the processes
that run trials), ``budget.py`` (when to stop), ``progress.py`` (what is printed).
The main process prints one line per finished trial and the Pareto front at the end.
"""

from __future__ import annotations

import datetime
import sys
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO, cast

import optuna
from optuna.trial import TrialState

from effsearch.config import ConfigError
from effsearch.search.results import best, report
from effsearch.search.run import warmstart, workers
from effsearch.search.run.budget import StopAtBudget, StopAtTotal, repeated_failure, spent, starved
from effsearch.search.run.progress import dashboard_hint, header
from effsearch.search.run.workers import WARM_UP_BATCHES, run_workers, work
from effsearch.search.store.attrs import (
    BASELINE_KEY,
    OBJECTIVES_KEY,
    STUDY_FILE_KEY,
    TARGET_KEY,
    TUNE_COMPUTE_KEY,
    TUNE_TRIAL_KEY,
)
from effsearch.search.store.heartbeat import requeue_dead_local
from effsearch.search.store.storage import check_storage, open_storage
from effsearch.search.study import phases

if TYPE_CHECKING:
    from pathlib import Path

    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

    from effsearch.search.study.spec import StudySpec


class BaselineBroken(Exception):
    """The baseline's config does not train (found before the first trial)."""


def preflight(spec: StudySpec, data_root: str | Path | None, warm: bool = True) -> float | None:
    """Before the first trial: the storage opens (a ConfigError naming --storage otherwise), the
    data is there and the baseline's config trains a few batches (which also warms this process up)."""
    check_storage(spec)
    cfg = phases.trial_config(spec, spec.baseline)
    try:
        if warm:
            return workers.warm_up(cfg, data_root)
        from effsearch.trainer.data.splits import load_splits

        load_splits(cfg, data_root)
        return None
    except ConfigError as e:  # the data is missing: it is the study's base config that names it
        raise ConfigError(f"base.{e.field}" if e.field else "base", e.message, spec.source) from None
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - whatever stops the baseline's config: raised, named, exit 1
        raise BaselineBroken(f"{type(e).__name__}: {e}") from None


def metric_names(objectives: Sequence[str]) -> list[str]:
    """What optuna-dashboard labels each objective with (the study's user attr keeps the names)."""
    from effsearch.search.results.plots import LABELS

    return [LABELS.get(n, n) for n in objectives]


def ensure_study(spec: StudySpec, storage: str | BaseStorage) -> optuna.Study:
    """Create the study (or check the stored one matches) and queue the baseline and the warm starts once."""
    if spec.name in optuna.get_all_study_names(storage):
        study = optuna.load_study(study_name=spec.name, storage=storage)
        stored = study.user_attrs.get(OBJECTIVES_KEY)
        if (stored and list(stored) != list(spec.objectives)) or [
            d.name.lower() for d in study.directions
        ] != spec.directions:
            raise ConfigError(
                "objectives",
                f"study {spec.name!r} in {spec.storage_label()} was created with "
                f"objectives {stored or [d.name.lower() for d in study.directions]}; "
                f"the file names {list(spec.objectives)}. Use a new study name to "
                "change objectives",
                spec.source,
            )
    else:
        study = optuna.create_study(
            study_name=spec.name,
            storage=storage,
            directions=spec.directions,  # type: ignore[arg-type]  # Optuna's words
            load_if_exists=True,
        )
        study.set_user_attr(OBJECTIVES_KEY, list(spec.objectives))
        study.set_user_attr(TARGET_KEY, phases.trial_config(spec, spec.base).target_accuracy)
        from effsearch.search.study.studyfile import dump

        study.set_user_attr(STUDY_FILE_KEY, dump(spec))
    if study.metric_names is None:  # the dashboard's axes read these instead of "Objective 0"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study.set_metric_names(metric_names(spec.objectives))
    if not any(t.user_attrs.get(BASELINE_KEY) for t in study.get_trials(deepcopy=False)):
        study.enqueue_trial(spec.space.encode(spec.baseline), user_attrs={BASELINE_KEY: True})
    if spec.phase != "confirm":  # phase 2 confirms phase 1's picks only
        warmstart.enqueue(spec, study)
    return study


def run(
    spec: StudySpec, data_root: str | Path | None = None, out: TextIO | None = None, t0: float | None = None
) -> int:
    """Run (or resume) a study, with its tuning phase if it has one; returns the exit code:
    0 done, 1 the study (or a phase) could not do its work, 130 after Ctrl-C. Bad input (a
    storage that cannot be opened, missing data) raises ConfigError (exit code 2).
    ``t0``: when the command started."""
    out = out or sys.stderr
    t0 = t0 or time.time()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:  # before any trial: the storage opens, the data is there, the baseline's config trains
        warm = preflight(phases.tune_spec(spec) if phases.enabled(spec) else spec, data_root)
    except BaselineBroken as e:
        print(
            f"effsearch run: the baseline's config ({spec.source}: base, baseline) does not train: {e}\n"
            "  (found by a few batches of it before the first trial; nothing was run)",
            file=out,
        )
        return 1
    if not phases.enabled(spec):
        return run_phase(spec, data_root, out, t0, warm=warm)
    tune = phases.tune_spec(spec)
    code = run_phase(tune, data_root, out, t0, warm=warm)
    if code:
        if code == 1:
            print("phase 2 (confirm) not started: phase 1 did not finish its work", file=out)
        return code
    storage = open_storage(spec)
    confirm = phases.confirm_spec(spec)
    study = ensure_study(confirm, storage)
    tune_study = optuna.load_study(study_name=tune.name, storage=storage)
    picked = phases.queue_confirm(spec, tune_study, study)
    # Phase 1 is over: its compute is part of what the confirmed front cost (search.cost).
    study.set_user_attr(TUNE_COMPUTE_KEY, spent(tune_study.get_trials(deepcopy=False)))
    print(f"\nconfirming phase 1's top {len(picked)} on the full data: trials {picked} of {tune.name!r}\n", file=out)
    code = run_phase(confirm, data_root, out, t0, study)
    text = phases.describe(study, spec.objectives)
    if text:
        print("\n" + text, file=out)
    return code


def run_phase(
    spec: StudySpec,
    data_root: str | Path | None,
    out: TextIO,
    t0: float,
    study: optuna.Study | None = None,
    warm: float | None = None,
) -> int:
    """Run (or resume) one study to its n_trials. ``warm``: seconds the pre-flight warm-up took."""
    storage = open_storage(spec)
    study = study or ensure_study(spec, storage)
    lost = [] if spec.is_rdb else requeue_dead_local(study, spec.heartbeat.max_retry)
    print_opening(spec, study, out, lost, warm)
    budget = StopAtBudget(spec, storage)
    if StopAtTotal(spec.n_trials).reached(study):
        print(f"the study already has {spec.n_trials} trials; raise --n-trials to run more", file=out)
        outcome = "done"
    elif budget.reached(study):
        print(
            f"the study has spent its budget of {spec.budget:g} compute seconds; raise --budget to run more", file=out
        )
        outcome = "done"
    elif spec.workers == 1:
        outcome = work(spec, 0, data_root, progress=True, out=out, t0=t0, since=t0, warm=False)
    else:
        outcome = run_workers(spec, study, data_root, out, t0)
    print("", file=out)
    print(report.status_table(study, spec.objectives, show_all=False), file=out)
    trials = study.get_trials(deepcopy=False)
    print_summary(spec, study, trials, budget, out)
    return exit_code(spec, study, trials, outcome, out, t0)


def print_opening(spec: StudySpec, study: optuna.Study, out: TextIO, lost: list[int], warm: float | None) -> None:
    """What a phase says before its first trial: the header, the study file's notes, the warm-up, lost trials."""
    print(header(spec, study), file=out)
    for note in spec.notes if spec.phase != "confirm" else ():  # warm starts are queued in phase 1 only
        print(f"  note       {note}", file=out)
    if warm is not None:
        print(
            f"  warm-up    the baseline's config ran {WARM_UP_BATCHES} batches untimed ({warm:.1f} s), so the "
            "first timed trial is not this process's first run",
            file=out,
            flush=True,
        )
    if lost:
        print(f"  re-queued trials {lost}: their worker process is gone", file=out)


def print_summary(
    spec: StudySpec, study: optuna.Study, trials: list[FrozenTrial], budget: StopAtBudget, out: TextIO
) -> None:
    """What a phase says after its trials' table: the compute, the cost, what it left queued, the dashboard."""
    print(
        f"\ncompute: {spent(trials):.1f} s (the summed wall seconds of this study's trials)"
        + (
            f"; budget {spec.budget:g} s, {max(0.0, cast(float, budget.left(study))):.1f} s left" if spec.budget else ""
        ),
        file=out,
    )
    if spec.phase != "tune":  # phase 1's baseline is a subset's: its runs are not the user's unit
        print("\n".join(best.cost_of(study).lines()), file=out)
    # Phase 1's picks still queued; a queued trial of no pick (phase 2's baseline, queued again
    # after Ctrl-C or a lost worker; one a user enqueued) is not one of them.
    queued = (t.user_attrs.get(TUNE_TRIAL_KEY) for t in trials if t.state == TrialState.WAITING)
    unrun: list[int] = sorted({n for n in queued if n is not None})
    if spec.phase == "confirm" and unrun and budget.reached(study):
        print(
            f"phase 2 left phase 1's trials {unrun} unconfirmed (all or some of their seeds): the budget is "
            "spent; raise --budget and run again to confirm them",
            file=out,
        )
    warning = report.baseline_warning(trials)
    if warning:
        print(f"\nwarning: {warning}", file=out)
    print(f"\ndashboard: {dashboard_hint(spec)}", file=out)


def exit_code(
    spec: StudySpec, study: optuna.Study, trials: list[FrozenTrial], outcome: str, out: TextIO, t0: float
) -> int:
    """The phase's exit code (0 done, 1 it could not do its work, 130 Ctrl-C), saying why when not 0."""
    if outcome == "interrupted":
        print("interrupted: finished trials are kept; run the same command again to resume", file=out)
        return 130
    why = starved(spec, study)
    if why:
        print(f"\n{why}", file=out)
        return 1
    hit = repeated_failure(study, spec.failure_limit, datetime.datetime.fromtimestamp(t0))
    if outcome == "failed" or hit:
        if hit:
            reason, numbers = hit
            print(
                f"\neffsearch run: stopped: trials {', '.join(map(str, numbers))} failed with the same error "
                f"(failure_limit: {spec.failure_limit}):\n  {reason}",
                file=out,
            )
        return 1
    if not any(t.state == TrialState.COMPLETE for t in trials):
        print(f"\neffsearch run: study {spec.name!r} has no completed trial", file=out)
        return 1
    return 0
