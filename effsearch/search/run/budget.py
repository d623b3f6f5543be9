"""When a worker stops: the study has its n_trials, has spent its compute budget, or the same
error keeps repeating."""

from __future__ import annotations

import datetime
import math
import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import optuna
from optuna.trial import FrozenTrial

from effsearch.search.store import queries
from effsearch.search.store.attrs import BASELINE_KEY, REASON_KEY, STATUS_KEY, TRAIN_SECONDS_KEY, WALL_KEY
from effsearch.search.study import phases

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

    from effsearch.config.options import SubsetTuning
    from effsearch.search.study.spec import StudySpec


class StopAtTotal:
    """Stop this worker once the study's counted trials (plus those running elsewhere) reach n_trials."""

    def __init__(self, n_trials: int | None) -> None:
        self.n = n_trials

    def reached(self, study: optuna.Study) -> bool:
        if self.n is None:
            return False
        # A dead worker's trial stays RUNNING until someone checks its heartbeat: check first,
        # so it is failed (and re-queued) instead of counted as running.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optuna.storages.fail_stale_trials(study)
        c = queries.counts(study.get_trials(deepcopy=False))
        return c["done"] + c["running"] >= self.n

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if self.reached(study):
            study.stop()


def spent(trials: Iterable[FrozenTrial]) -> float:
    """Compute seconds: the summed wall seconds of the finished trials (a duplicate's are its look-up,
    and any wait for the running trial it repeats)."""
    return sum(t.user_attrs.get(WALL_KEY) or 0.0 for t in trials if t.state.is_finished())


def reserve(spec: StudySpec, trials: Sequence[FrozenTrial]) -> float:
    """Phase 2's expected cost, held back from phase 1's budget: the baseline and the current top_k
    picks (x seeds), each at its own phase-1 cost on the full data: train seconds scaled up (/
    data_fraction / epochs_fraction), the rest of its wall seconds (set-up, validation and test
    evaluation, which do not shrink with the training subset) as they were; a pick not yet found
    at the baseline's. Scaling the whole wall time overstated it 2x on Fashion-MNIST, and a 2,400 s
    budget then left phase 1 nothing after its baseline. Costing every pick as the baseline
    understated it 2x on Fashion-MNIST (GLISTER picks cost 5x the baseline): phase 2 ran out of budget
    with 3 of its 5 picks unconfirmed. 0 until the baseline has run."""
    base = queries.baseline_trial(trials)
    if base is None or not base.user_attrs.get(WALL_KEY):
        return 0.0
    t = phases.tuning_of(spec)
    picks = [full_data(t, p) for p in phases.top_k(trials, spec.directions, t.top_k)]
    picks += [full_data(t, base)] * (t.top_k - len(picks))
    return full_data(t, base) + t.seeds * sum(picks)


def full_data(tuning: SubsetTuning, trial: FrozenTrial) -> float:
    """A phase-1 trial's expected wall seconds on the full data: its train seconds scaled up, the
    rest (set-up, evaluation) as it was."""
    wall = trial.user_attrs.get(WALL_KEY) or 0.0
    train = min(trial.user_attrs.get(TRAIN_SECONDS_KEY) or wall, wall)
    return train / (tuning.data_fraction * tuning.epochs_fraction) + wall - train


def seconds(spec: StudySpec, trials: Sequence[FrozenTrial]) -> float | None:
    """The budget in compute seconds (None: no budget). ``budget: {baseline_runs: N}`` is N x the
    baseline trial's wall seconds (phase 1's scaled to the full data, as ``reserve`` scales it);
    until the baseline has run there is nothing to stop on (inf)."""
    if spec.budget is not None or spec.budget_runs is None:
        return spec.budget
    base = queries.baseline_trial(trials)
    if base is None or not base.user_attrs.get(WALL_KEY):
        return math.inf
    wall = float(base.user_attrs[WALL_KEY])
    unit = full_data(phases.tuning_of(spec), base) if spec.phase == "tune" else wall
    return spec.budget_runs * unit


# Phase 1 may always spend this share of the budget, whatever phase 2's reserve says. Phase 2
# confirms its picks cheapest first, so what the budget then cannot cover is the costliest pick
# (the accurate end of the front), left unconfirmed and said so, not phase 1's search. In a
# Fashion-MNIST study one front member that trained 74 s on the subset (0.46x the baseline's speed) was
# reserved at 2 x 368 s, and phase 1 stopped after 74 of its 250 trials (537 of 2,400 s). Half is
# what phase 1 spent when nothing went wrong (46% of the compute in two studies; docs/results.md).
TUNE_SHARE = 0.5


def tune_left(spec: StudySpec, trials: Sequence[FrozenTrial]) -> float:
    """Compute seconds phase 1 may still spend: what the budget leaves after phase 2's expected
    cost (``reserve``), and never less than what is left of ``TUNE_SHARE`` of the budget."""
    budget = seconds(spec, trials)
    assert budget is not None  # called only with a budget
    used = spent(trials)
    return max(budget - used - reserve(spec, trials), TUNE_SHARE * budget - used)


def starved(spec: StudySpec, study: optuna.Study) -> str | None:
    """Why the study (or phase 1) could not search: its budget (phase 1's: less phase 2's expected
    cost) ran out with no trial but the baseline finished; or None."""
    trials = study.get_trials(deepcopy=False)
    budget = seconds(spec, trials)
    if budget is None or spec.phase == "confirm":
        return None
    if any(t.state.is_finished() and not t.user_attrs.get(BASELINE_KEY) for t in trials):
        return None
    if spec.phase != "tune":
        used = spent(trials)
        if used < budget or not used or spec.n_trials == 1:  # not run out, nothing run, or the baseline only asked for
            return None
        return (
            f"budget: {budget:g} compute seconds were spent by the baseline ({used:.1f} s): nothing was "
            f"searched; give --budget room for the search, e.g. {20 * used:.0f} (20 runs of the baseline)"
        )
    if tune_left(spec, trials) > 0:
        return None
    need, used = reserve(spec, trials), spent(trials)  # for the message; 0: the baseline has not run
    if not need:
        return None
    n = phases.confirm_spec(spec).n_trials
    return (
        f"budget: {budget:g} compute seconds leave nothing for phase 1's search: its baseline "
        f"spent {used:.0f} s (phase 1 may spend half the budget) and phase 2 ({n} full-data trials) is "
        f"expected to cost {need:.0f} s; give --budget at least {2 * (used + need):.0f}"
    )


class StopAtBudget:
    """Stop this worker once the study has spent its ``budget`` compute seconds (see ``spent``);
    a trial running when it runs out finishes. With a tuning phase the budget covers both phases:
    phase 1 stops once it spent the budget minus phase 2's expected cost (``reserve``) or half the
    budget, whichever is more (``tune_left``), phase 2 once both phases together spent it."""

    def __init__(self, spec: StudySpec, storage: str | BaseStorage) -> None:
        self.spec, self.storage = spec, storage
        self._before: float | None = None  # phase 1's compute, for phase 2 (phase 1 is over: it no longer changes)

    def left(self, study: optuna.Study) -> float | None:
        """Compute seconds left to this phase (None: no budget)."""
        trials = study.get_trials(deepcopy=False)
        budget = seconds(self.spec, trials)
        if budget is None:
            return None
        if self.spec.phase == "tune":
            return tune_left(self.spec, trials)
        left = budget - spent(trials)
        if self.spec.phase == "confirm":
            left -= self.earlier()
        return left

    def earlier(self) -> float:
        if self._before is None:
            tune = optuna.load_study(study_name=phases.tune_spec(self.spec).name, storage=self.storage)
            self._before = spent(tune.get_trials(deepcopy=False))
        return self._before

    def reached(self, study: optuna.Study) -> bool:
        left = self.left(study)
        return left is not None and left <= 0

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if self.reached(study):
            study.stop()


# Statuses of trials that failed with an error (an exception, a config the trainer refused);
# a diverged trial is a result of the search (a too-high lr), not an error.
ERROR_STATUSES = ("failed", "invalid")


def repeated_failure(
    study: optuna.Study, limit: int, since: datetime.datetime | None = None
) -> tuple[str | None, list[int]] | None:
    """(the error, the trial numbers) when the last ``limit`` finished trials started since
    ``since`` all failed with the same error (class and message); else None."""
    if not limit:
        return None
    done = [
        t
        for t in study.get_trials(deepcopy=False)
        if queries.counted(t) and (since is None or (t.datetime_start and t.datetime_start >= since))
    ]
    last = sorted(done, key=lambda t: (t.datetime_complete or t.datetime_start, t.number))[-limit:]
    if len(last) < limit or any(t.user_attrs.get(STATUS_KEY) not in ERROR_STATUSES for t in last):
        return None
    reasons = {t.user_attrs.get(REASON_KEY) for t in last}
    return (reasons.pop(), sorted(t.number for t in last)) if len(reasons) == 1 else None


class StopOnRepeatedFailure:
    """Stop this worker when the study's last few trials failed with the same error: a missing
    dataset, a broken install or a bad base config fails every trial alike."""

    hit: tuple[str | None, list[int]] | None

    def __init__(self, limit: int, since: datetime.datetime) -> None:
        self.limit, self.since, self.hit = limit, since, None

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.hit = repeated_failure(study, self.limit, self.since)
        if self.hit:
            study.stop()
