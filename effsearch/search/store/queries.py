"""Questions asked of a study's trials: counts, the baseline, the Pareto front, the best recipe.

Answers only, no text: ``report`` renders them, and the pruner, the budget and the workers
ask them without importing any rendering. Only Optuna is imported here, so ``effsearch
status`` answers in a second or two.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import yaml
from optuna.trial import TrialState

from effsearch.config.metrics import ACCURACY, Target
from effsearch.objectives import FINAL_METRIC, TIME_OBJECTIVES, metric_of
from effsearch.search.store.attrs import (
    BASELINE_KEY,
    CONFIG_KEY,
    COUNTED_FAIL,
    DUPLICATE_KEY,
    NOT_RUN,
    OBJECTIVES_KEY,
    PLACEMENT_KEY,
    RETRY_OF_KEY,
    STATUS_KEY,
    TARGET_KEY,
    TARGET_METRIC_KEY,
    TIME_TO_TARGET_KEY,
    WARM_KEY,
)
from effsearch.search.store.record import Recorded
from effsearch.search.store.storage import storage_errors, why

if TYPE_CHECKING:
    import optuna
    from optuna.trial import BaseTrial, FrozenTrial


log = logging.getLogger(__name__)


def objectives_of(study: optuna.Study) -> list[str]:
    return list(study.user_attrs.get(OBJECTIVES_KEY) or [f"objective_{i}" for i in range(len(study.directions))])


def measures(trial: FrozenTrial, objectives: list[str]) -> tuple[float, float, bool]:
    """(time to target (inf for a miss), the final quality as a score, reached the target). The
    quality is the final value of the study's metric (its final-value objective's, else the target's:
    ``objectives.metric_of``), turned so that higher is better (a loss negated: ``Target.score``);
    ``quality`` reads it back as the metric's value."""
    a = Recorded.of(trial)
    values = dict(zip(objectives, trial.values))
    tta = next((values[n] for n in TIME_OBJECTIVES if n in values), a.time_to_target)
    metric = metric_of(objectives, a.target_metric)
    final = next((values[n] for n, m in FINAL_METRIC.items() if m == metric and n in values), a.final(metric))
    hit = reached(trial)
    if tta is None or not hit:
        tta = math.inf
    score = Target(metric, 0.0).score(final) if final is not None else -math.inf
    return float(tta), score, bool(hit)


def quality(objectives: list[str], target_metric: str = ACCURACY) -> Target:
    """What ``measures``' score is a score of: the metric, with its direction (``unscore`` reads it back)."""
    return Target(metric_of(objectives, target_metric), 0.0)


def study_target(study: optuna.Study) -> Target | None:
    """The target a study's trials aim at (None: not recorded yet); older studies': val accuracy."""
    value = study.user_attrs.get(TARGET_KEY)
    if value is None:
        return None
    return Target(study.user_attrs.get(TARGET_METRIC_KEY) or ACCURACY, float(value))


def counted(trial: FrozenTrial) -> bool:
    """Does a finished trial count toward n_trials? A FAIL only if effsearch recorded why (COUNTED_FAIL)."""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
        return True
    return trial.state == TrialState.FAIL and trial.user_attrs.get(STATUS_KEY) in COUNTED_FAIL


def counts(trials: Iterable[FrozenTrial]) -> dict[str, int]:
    """How many trials are in each state. ``queued_again``: FAILed trials that are not failures, an
    interrupted one or a lost worker's, whose parameters wait (or ran) as a later trial; ``done``:
    those counted toward n_trials."""
    trials = list(trials)
    retried = {t.user_attrs.get(RETRY_OF_KEY) for t in trials}
    c = dict.fromkeys(("complete", "pruned", "failed", "queued_again", "not_run", "running", "waiting", "done"), 0)
    for t in trials:
        if t.state == TrialState.COMPLETE:
            c["complete"] += 1
        elif t.state == TrialState.PRUNED:
            c["pruned"] += 1
        elif t.state == TrialState.FAIL and t.user_attrs.get(STATUS_KEY) in NOT_RUN:
            c["not_run"] += 1
        elif t.state == TrialState.FAIL and (t.number in retried or t.user_attrs.get(STATUS_KEY) == "interrupted"):
            c["queued_again"] += 1
        elif t.state == TrialState.FAIL:
            c["failed"] += 1
        elif t.state == TrialState.RUNNING:
            c["running"] += 1
        elif t.state == TrialState.WAITING:
            c["waiting"] += 1
        c["done"] += counted(t)
    return c


def config_of(trial: BaseTrial) -> dict | None:
    text = trial.user_attrs.get(CONFIG_KEY)
    try:
        return yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return None


def reached(trial: FrozenTrial) -> bool:
    """Did the trial's delivered model reach the target? (A miss is infeasible: see objectives.)"""
    flag = Recorded.of(trial).reached_target
    if flag is not None:
        return bool(flag)
    return all(c <= 0 for c in trial.constraints.values())


def seconds_to_target(trial: FrozenTrial | None) -> float | None:
    """The trial's recorded time to target (None: no trial, or no time: it missed, or has not
    finished). Speed-ups are ``trainer.result.speedup`` of two of these."""
    return Recorded.of(trial).time_to_target if trial is not None else None


def device_kind(trial: FrozenTrial | None) -> str | None:
    """The kind of device a trial trained on (its name: "NVIDIA H100 80GB HBM3", "cpu"); None when
    it recorded none (not yet run, or an effsearch before devices were recorded)."""
    placement = trial.user_attrs.get(PLACEMENT_KEY) if trial is not None else None
    return placement.get("name") if isinstance(placement, dict) else None


def baseline_trial(trials: Iterable[FrozenTrial], kind: str | None = None) -> FrozenTrial | None:
    """The study's completed baseline; with ``kind``, the one timed on that kind of device (a
    baseline that recorded no kind counts for every kind). Speed-ups are read against it only:
    a trial's time on another kind of GPU says nothing of its method."""
    for t in trials:
        if t.user_attrs.get(BASELINE_KEY) and t.state == TrialState.COMPLETE:
            if kind is None or device_kind(t) in (None, kind):
                return t
    return None


def baseline_for(trials: Sequence[FrozenTrial], trial: FrozenTrial) -> FrozenTrial | None:
    """The baseline ``trial``'s speed-up is read against: the one timed on its kind of device."""
    return baseline_trial(trials, device_kind(trial))


def baseline_time_to_target(study: optuna.Study, kind: str | None = None) -> float | None:
    """The study's completed baseline's time to target, on ``kind`` of device when given (None:
    none yet, or it missed)."""
    base = baseline_trial(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), kind)
    return base.user_attrs.get(TIME_TO_TARGET_KEY) if base is not None else None


def front(study: optuna.Study, trials: Sequence[FrozenTrial] | None = None) -> list[FrozenTrial]:
    """The Pareto front of the complete trials that reached the target, a configuration
    confirmed with several seeds counted once, at its mean (``phases.seed_means``). A storage
    that does not answer (a dropped database connection, a journal file gone) is a warning
    naming the error, and no front; any other error is a bug and raises."""
    from effsearch.search import pareto
    from effsearch.search.study import phases

    try:
        trials = study.get_trials(deepcopy=False) if trials is None else trials
        directions = study.directions
    except storage_errors() as e:
        log.warning("cannot read the Pareto front of study %r: %s", study.study_name, why(e))
        return []
    # A duplicate (answered with an earlier trial's result) is that trial's point again. A miss
    # is infeasible (its constraint), as in Optuna's best_trials.
    pool = [
        t
        for t in phases.seed_means(trials)
        if t.state == TrialState.COMPLETE
        and DUPLICATE_KEY not in t.user_attrs
        and all(c <= 0 for c in t.constraints.values())
    ]
    if not pool:
        return []
    names = [d.name.lower() for d in directions]
    points = [phases.minimised(t.values, names) for t in pool]
    return sorted((pool[i] for i in pareto.fronts(points)[0]), key=lambda t: t.values)


def best_tta(trials: Iterable[FrozenTrial]) -> float | None:
    recorded = [Recorded.of(t).time_to_target for t in trials if t.state == TrialState.COMPLETE]
    times = [x for x in recorded if x is not None]
    return min(times, default=None)


def best_recipe(trials: Iterable[FrozenTrial]) -> FrozenTrial | None:
    """The fastest complete trial of a named recipe (``warm_start: [recipe:NAME]``) that reached the
    target: the yardstick a search must beat (None: no recipe trained, or none reached it)."""
    hits = [
        t
        for t in trials
        if t.state == TrialState.COMPLETE
        and DUPLICATE_KEY not in t.user_attrs
        and str(t.user_attrs.get(WARM_KEY, "")).startswith("recipe:")
        and reached(t)
        and Recorded.of(t).time_to_target is not None
    ]
    return min(hits, key=lambda t: (Recorded.of(t).time_to_target, t.number), default=None)
