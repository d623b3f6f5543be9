"""`effsearch run`: a study (or its two phases) from the pre-flight to the final table.

The jobs live beside it: ``objective.py`` (one trial), ``workers.py`` (the processes
that run trials), ``budget.py`` (when to stop), ``progress.py`` (what is shown: the main
process's ``Report``, one line per finished trial and the Pareto front at the end).
A run that cannot do its work raises ``StudyFailed``; Ctrl-C, ``KeyboardInterrupt``.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

import optuna
from optuna.trial import TrialState

from effsearch.config import ConfigError
from effsearch.config.metrics import Target, target_of
from effsearch.objectives import TIME_OBJECTIVES
from effsearch.search.run import target, warmstart, workers
from effsearch.search.run.budget import StopAtBudget, StopAtTotal, repeated_failure, spent, starved
from effsearch.search.run.errors import StudyFailed
from effsearch.search.run.objective import TrainFn
from effsearch.search.run.progress import Callback, Progress, Report, budget_text
from effsearch.search.run.workers import WARM_UP_BATCHES, run_workers, work
from effsearch.search.store import queries
from effsearch.search.store.attrs import (
    BASELINE_KEY,
    OBJECTIVES_KEY,
    STUDY_FILE_KEY,
    TARGET_KEY,
    TARGET_METRIC_KEY,
    TUNE_COMPUTE_KEY,
)
from effsearch.search.store.heartbeat import requeue_dead_local
from effsearch.search.store.record import Recorded
from effsearch.search.store.storage import (
    check_artifacts,
    check_storage,
    drop_empty_journal,
    open_storage,
    storage_errors,
    why,
)
from effsearch.search.study import phases

if TYPE_CHECKING:
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

    from effsearch.search.study.spec import StudySpec


class BaselineBroken(Exception):
    """The baseline's config does not train (found before the first trial)."""


def preflight(
    spec: StudySpec, data_root: str | Path | None, warm: bool = True, train_fn: TrainFn | None = None
) -> float | None:
    """Before the first trial: the storage opens (a ConfigError naming --storage otherwise), the
    data is there and the baseline's config trains a few batches (which also warms this process up)."""
    check_storage(spec)
    if spec.checkpoint_every is not None:
        check_artifacts(spec)
    cfg = phases.trial_config(spec, spec.baseline)
    try:
        if warm:
            return workers.warm_up(cfg, data_root, train_fn)
        from effsearch.trainer.data.splits import load_splits

        load_splits(cfg, data_root)
        return None
    except ConfigError as e:  # the data is missing: it is the study's base config that names it
        raise ConfigError(f"base.{e.field}" if e.field else "base", e.message, spec.source) from None
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - whatever stops the baseline's config: raised, named, exit 1
        raise BaselineBroken(f"{type(e).__name__}: {e}") from None


def finished(spec: StudySpec) -> bool:
    """The study exists and has run its trials or spent its budget: a rerun trains nothing, so its
    pre-flight skips the warm-up (the data is still checked)."""
    if not spec.is_rdb and not Path(spec.storage).is_file():
        return False
    try:
        storage = open_storage(spec)
        study = optuna.load_study(study_name=spec.name, storage=storage)
    except KeyError:  # not created yet
        return False
    except storage_errors():  # a storage that cannot answer: preflight's to say
        return False
    return StopAtTotal(spec.n_trials).reached(study) or StopAtBudget(spec, storage).reached(study)


def full_batches(spec: StudySpec, data_root: str | Path | None) -> str | None:
    """A note when searched batch sizes reach the training split's size (read after the pre-flight
    loaded it): each trains one batch an epoch, the same run whatever the size, so the sampler
    spends trials on one point several times (None: no such choice)."""
    dim = next((d for d in spec.space.dims if d.name == "batch_size" and d.name in spec.space.active), None)
    if dim is None or not dim.choices:
        return None
    from effsearch.trainer.data.splits import load_splits

    try:  # cached by the warm-up: no second read
        n = len(load_splits(phases.trial_config(spec, spec.baseline), data_root).train_y)
    except Exception:  # noqa: BLE001 - a note only; a train_fn of the caller's may read data effsearch cannot
        return None
    big = sorted(b for b in dim.choices if b >= n)
    if not n or len(big) < 2:
        return None
    subset = " (phase 1's data_fraction)" if spec.phase == "tune" else ""
    return (
        f"batch_size choices {', '.join(map(str, big))} reach the {n} training examples{subset}: each trains "
        "one full batch an epoch, the same run, so the search spends trials on one point (space.ranges.batch_size "
        "can stop below)"
    )


def metric_names(objectives: Sequence[str], target: Target | None = None) -> list[str]:
    """What optuna-dashboard labels each objective with (the study's user attr keeps the names): a
    time objective names its target's metric and direction (``time to val loss <= 2.3``)."""
    from effsearch.search.results.plots import label

    return [label(n, target) for n in objectives]


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
        by = target.offset(spec)
        goal = target_of(phases.trial_config(spec, spec.base))
        study.set_user_attr(TARGET_METRIC_KEY, goal.metric)
        if by is None:
            study.set_user_attr(TARGET_KEY, goal.value)
        else:  # resolved from the baseline when it completes (search/run/target.py)
            study.set_user_attr(target.OFFSET_KEY, by)
        from effsearch.search.study.studyfile import dump

        study.set_user_attr(STUDY_FILE_KEY, dump(spec))
    if study.metric_names is None:  # the dashboard's axes read these instead of "Objective 0"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study.set_metric_names(metric_names(spec.objectives, target_of(phases.trial_config(spec, spec.base))))
    if not any(t.user_attrs.get(BASELINE_KEY) for t in study.get_trials(deepcopy=False)):
        study.enqueue_trial(spec.space.encode(spec.baseline), user_attrs={BASELINE_KEY: True})
    if spec.phase != "confirm":  # phase 2 confirms phase 1's picks only
        warmstart.enqueue(spec, study)
    return study


def run(
    spec: StudySpec,
    data_root: str | Path | None = None,
    out: TextIO | None = None,
    t0: float | None = None,
    callbacks: Sequence[Callback] = (),
    train_fn: TrainFn | None = None,
) -> None:
    """Run (or resume) a study, with its tuning phase if it has one, showing its progress on ``out``
    (None: nothing). Raises ``StudyFailed`` when the study (or a phase) could not do its work,
    ``KeyboardInterrupt`` after Ctrl-C (finished trials kept, the running ones queued again), and
    ``ConfigError`` on bad input (a storage that cannot be opened, missing data). ``t0``: when the
    command started. ``callbacks``: each called with (study, trial) after a trial finishes.
    ``train_fn``: what trials train with (default: ``objective.trainer``'s)."""
    report = Report(out)
    phase = functools.partial(run_phase, data_root=data_root, report=report, t0=t0 or time.time())
    spec = warmstart.with_earlier_studies(spec)  # warm_start: [study:NAME@STORAGE]: their fronts
    first = phases.tune_spec(spec) if phases.enabled(spec) else spec
    try:  # before any trial: the storage opens, the data is there, the baseline's config trains
        warm = preflight(first, data_root, warm=not finished(first), train_fn=train_fn)
    except BaselineBroken as e:
        fail(
            report,
            spec,
            f"effsearch run: the baseline's config ({spec.source}: base, baseline) does not train: {e}\n"
            "  (found by a few batches of it before the first trial; nothing was run)",
        )
    note = full_batches(first, data_root)
    if note:
        spec = dataclasses.replace(spec, notes=[*spec.notes, note])
    phase = functools.partial(phase, cold=warm is None)
    if not phases.enabled(spec):
        phase(spec, warm=warm, callbacks=callbacks, train_fn=train_fn)
        return
    tune = phases.tune_spec(spec)
    try:
        phase(tune, warm=warm, callbacks=callbacks, train_fn=train_fn)
    except StudyFailed as e:
        fail(report, spec, "phase 2 (confirm) not started: phase 1 did not finish its work", str(e))
    storage = open_storage(spec)
    confirm = phases.confirm_spec(spec)
    study = opened(confirm, storage, report)
    tune_study = optuna.load_study(study_name=tune.name, storage=storage)
    picked = phases.queue_confirm(spec, tune_study, study)
    confirm = phases.confirm_spec(spec, picks=len(picked))  # only what was queued: nothing sampled
    # Phase 1 is over: its compute is part of what the confirmed front cost (search.cost).
    study.set_user_attr(TUNE_COMPUTE_KEY, spent(tune_study.get_trials(deepcopy=False)))
    report.line(f"\n{confirming(picked, phases.tuning_of(spec).top_k, tune.name)}\n")
    try:
        phase(confirm, study=study, callbacks=callbacks, train_fn=train_fn)
    finally:
        text = phases.describe(study, spec.objectives)
        if text:
            report.line("\n" + text)


def opened(spec: StudySpec, storage: BaseStorage, report: Report) -> optuna.Study:
    """``ensure_study``; a storage that refuses the writes (a full disk) is the run's failure, said
    in one line, with no empty journal left behind."""
    try:
        return ensure_study(spec, storage)
    except storage_errors() as e:
        drop_empty_journal(spec)
        fail(report, spec, f"effsearch run: cannot write study {spec.name!r} to {spec.storage_label()}: {why(e)}")


def confirming(picked: list[int], top_k: int, tune_name: str) -> str:
    """What phase 2 confirms; said plainly when phase 1 completed fewer than top_k configurations."""
    if not picked:
        return (
            f"phase 1 ({tune_name!r}) completed no configuration besides its baseline (the others were "
            "pruned or failed): phase 2 trains the baseline only, and the front has no pick to confirm"
        )
    fewer = f" (phase 1 completed {len(picked)} besides its baseline, not top_k {top_k})" if len(picked) < top_k else ""
    return f"confirming phase 1's top {len(picked)} on the full data{fewer}: trials {picked} of {tune_name!r}"


def fail(report: Report, spec: StudySpec, why: str, before: str = "") -> NoReturn:
    """Show ``why`` and raise it as StudyFailed (``before``: what an earlier phase failed with). An
    empty ``why``: a worker stopped the study on an error it logged, as it happened."""
    if why:
        report.line(why)
    reason = why.strip() or "a worker stopped it on an error it logged (the 'effsearch' logger)"
    raise StudyFailed(f"study {spec.name!r} could not do its work: " + (f"{before}\n{reason}" if before else reason))


def run_phase(
    spec: StudySpec,
    data_root: str | Path | None,
    report: Report,
    t0: float,
    study: optuna.Study | None = None,
    warm: float | None = None,
    callbacks: Sequence[Callback] = (),
    train_fn: TrainFn | None = None,
    cold: bool = False,
) -> None:
    """Run (or resume) one study to its n_trials. ``warm``: seconds the pre-flight warm-up took (for
    the header); ``cold``: the pre-flight ran none (the first phase had nothing left to train), so a
    trial run in this process is preceded by one."""
    storage = open_storage(spec)
    study = study or opened(spec, storage, report)
    lost = [] if spec.is_rdb else requeue_dead_local(study, spec.heartbeat.max_retry)
    budget = StopAtBudget(spec, storage)
    report.opening(spec, study, lost, warm, WARM_UP_BATCHES, budget)
    if StopAtTotal(spec.n_trials).reached(study):
        report.line(f"the study already has {spec.n_trials} trials; raise --n-trials to run more")
        outcome = "done"
    elif budget.reached(study):
        report.line(f"the study has spent its budget of {budget_text(spec, 'seconds')}; raise --budget to run more")
        outcome = "done"
    else:
        progress = Progress(spec, study, report, t0, callbacks)
        if spec.workers == 1:
            outcome = work(spec, 0, data_root, progress=progress, since=t0, warm=cold, train_fn=train_fn)
        else:
            outcome = run_workers(spec, study, data_root, progress, t0, train_fn)
    report.table(spec, study)
    trials = study.get_trials(deepcopy=False)
    report.summary(spec, study, trials, budget)
    if outcome == "interrupted":
        report.line("interrupted: finished trials are kept; run the same command again to resume")
        raise KeyboardInterrupt
    why = failure(spec, study, trials, outcome, t0)
    if why is not None:
        fail(report, spec, why)


def failure(spec: StudySpec, study: optuna.Study, trials: list[FrozenTrial], outcome: str, t0: float) -> str | None:
    """Why the phase could not do its work, as shown (None: it did)."""
    why = starved(spec, study)
    if why:
        return f"\n{why}"
    hit = repeated_failure(study, spec.failure_limit, datetime.datetime.fromtimestamp(t0))
    if hit:
        reason, numbers = hit
        return (
            f"\neffsearch run: stopped: trials {', '.join(map(str, numbers))} failed with the same error "
            f"(failure_limit: {spec.failure_limit}):\n  {reason}"
        )
    if outcome == "failed":  # a worker stopped the study on an error it logged (search/run/workers.py)
        return ""
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    if not done:
        return f"\neffsearch run: study {spec.name!r} has no completed trial"
    return no_front(spec, study, done)


def no_front(spec: StudySpec, study: optuna.Study, done: list[FrozenTrial]) -> str | None:
    """A study timed to a target whose completed trials all missed it has no front: nothing to
    pick, export or train, so the run failed. Phase 1 is exempt: a full-data target can be out of
    a subset's reach while its picks reach it on the full data (phase 2 is judged instead)."""
    if spec.phase == "tune" or not any(n in TIME_OBJECTIVES for n in spec.objectives):
        return None
    if queries.front(study, done):
        return None
    goal = Recorded.of(done[-1]).target
    said = f" ({goal.text()})" if goal is not None else ""
    n = len(done)
    return (
        f"\neffsearch run: study {spec.name!r} has no front to pick from: "
        + (f"none of its {n} completed trials reached" if n != 1 else "its one completed trial missed")
        + f" the target{said}. Loosen the target (target_accuracy, or "
        "target.value), give the base more epochs, or run more trials (--n-trials)"
    )
