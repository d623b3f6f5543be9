"""A study's anytime curve: the best speed-up found within a point of the baseline's accuracy,
against the compute spent so far, in runs of the baseline.

Trials are taken in the order they finished, phase 1's (a tuning phase) before phase 2's; each
adds its wall seconds (``budget.spent``'s unit) to the compute. After each, the curve reads the
best speed-up over the baseline trial among the finished trials that reached the target with a
final val accuracy at most ``within`` below the baseline's (``best --pick fastest-within``'s
question). On phase 2 a configuration confirmed with several seeds counts once all its seeds
have finished, at their mean (``phases.seed_means``), as ``best`` reads it. Phase 1's trials
train a subset against their own target, so their speed-ups are not the answer: the curve has
none until phase 2's baseline has run, and phase 1's own (over phase 1's baseline, on the
subset) is kept beside it as ``tune_speedup``, what the search saw.

The unit (one baseline run) is the final study's baseline trial's wall seconds, as in
``search.cost``: the last point's ``baseline_runs`` is the cost ``status`` shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from optuna.trial import FrozenTrial, TrialState

from effsearch.search.store import queries
from effsearch.search.store.attrs import (
    DUPLICATE_KEY,
    FAILED_SEEDS_KEY,
    SEED_TRIALS_KEY,
    TUNE_TRIAL_KEY,
    TUNING_KEY,
    WALL_KEY,
)
from effsearch.search.study import phases
from effsearch.trainer.result import speedup

if TYPE_CHECKING:
    from optuna import Study

WITHIN = 0.01  # one point of val accuracy


def _order(trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    done = [t for t in trials if t.state.is_finished()]
    return sorted(done, key=lambda t: (t.datetime_complete is None, t.datetime_complete or 0, t.number))


def _best(
    finished: Sequence[FrozenTrial], objectives: list[str], within: float, seeds: int
) -> tuple[float | None, int | None]:
    """(the best within-a-point speed-up over the baseline, its trial) among ``finished``."""
    base = queries.baseline_trial(finished)
    base_tta = queries.seconds_to_target(base)
    if base is None or speedup(base_tta, base_tta) is None:
        return None, None
    floor = queries.measures(base, objectives)[1] - within - 1e-9  # as best's fastest-within
    best, who = None, None
    for t in phases.seed_means(finished):
        if t.state != TrialState.COMPLETE or DUPLICATE_KEY in t.user_attrs:
            continue
        if (
            t.user_attrs.get(TUNE_TRIAL_KEY) is not None
            and len(t.user_attrs.get(SEED_TRIALS_KEY) or [t.number]) < seeds
            and not t.user_attrs.get(FAILED_SEEDS_KEY)
        ):
            continue  # a pick whose other seeds are still to run
        _, acc, hit = queries.measures(t, objectives)
        own = queries.seconds_to_target(queries.baseline_for(finished, t))  # on its own kind of device
        sp = speedup(own, queries.seconds_to_target(t))
        if hit and acc >= floor and sp is not None and (best is None or sp > best):
            best, who = sp, t.number
    return best, who


# A point's fields, in order (an export with no point still writes them as its CSV header).
COLUMNS = ("trial", "phase", "compute", "baseline_runs", "best_speedup", "best_trial", "tune_speedup")


def curve(study: Study, tune_study: Study | None = None, within: float = WITHIN) -> dict:
    """The anytime curve of ``study`` (phase 2 of a tuning phase: pass phase 1's study as
    ``tune_study``). Returns ``{"within", "baseline_wall", "phase1_runs", "points": [...]}``, a point
    per finished trial: its number and phase, the compute so far (s and baseline runs, None before
    the final baseline has run), the best speed-up within the point so far and its trial, and on
    phase 1 phase 1's own best (``tune_speedup``)."""
    objectives = queries.objectives_of(study)
    trials = study.get_trials(deepcopy=False)
    base = queries.baseline_trial(trials)
    unit = base.user_attrs.get(WALL_KEY) if base is not None else None
    seeds = int((study.user_attrs.get(TUNING_KEY) or {}).get("seeds") or 1)
    points, compute, phase1_end = [], 0.0, None

    def add(
        t: FrozenTrial, phase: str | None, speedup: float | None, who: int | None, tune_speedup: float | None = None
    ) -> None:
        nonlocal compute
        compute += t.user_attrs.get(WALL_KEY) or 0.0
        runs = round(compute / unit, 4) if unit else None
        points.append(dict(zip(COLUMNS, (t.number, phase, round(compute, 3), runs, speedup, who, tune_speedup))))

    if tune_study is not None:
        tune_trials = _order(tune_study.get_trials(deepcopy=False))
        tune_objectives = queries.objectives_of(tune_study)
        for i, t in enumerate(tune_trials):
            sp, _ = _best(tune_trials[: i + 1], tune_objectives, within, 1)
            add(t, "tune", None, None, sp)
        phase1_end = points[-1]["baseline_runs"] if points else None
    ordered = _order(trials)
    for i, t in enumerate(ordered):
        sp, who = _best(ordered[: i + 1], objectives, within, seeds)
        add(t, "confirm" if tune_study is not None else None, sp, who)
    return {"within": within, "baseline_wall": unit, "phase1_runs": phase1_end, "points": points}


def first_at(c: dict, speedup: float) -> float | None:
    """The compute (baseline runs) at which the curve first reached ``speedup``, None if never."""
    for p in c["points"]:
        if p["best_speedup"] is not None and p["best_speedup"] >= speedup:
            return p["baseline_runs"]
    return None
