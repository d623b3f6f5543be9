"""A study's target relative to its baseline (``config/targets.py``), resolved from trial 0.

The baseline trains first with every evaluation scored whole and no target (``targets.unresolved``);
when it completes, the target is its final value of the target's metric made the offset better
(``targets.resolve``: a val accuracy plus -0.01, a val loss plus 0.01), its own time to target is
read off its curve, and the study keeps the number (user attribute ``target_accuracy``, whatever
the metric) for every other trial, worker and reader. A trial that starts before then
(another worker) waits for it. Phase 1 of a tuning phase resolves against its own baseline unless
the tuning phase names a target of its own; phase 2 against its own (the full data's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from optuna.trial import TrialState

from effsearch.config import targets
from effsearch.config.metrics import ACCURACY, Target
from effsearch.search.store.attrs import BASELINE_KEY, TARGET_KEY, TARGET_OFFSET_KEY
from effsearch.trainer.result import time_to_target

if TYPE_CHECKING:
    import optuna

    from effsearch.config import TrainConfig
    from effsearch.search.study.spec import StudySpec
    from effsearch.trainer.result import RunResult

RESOLVED_KEY = TARGET_KEY  # the study's target, once known (as for a fixed one)
OFFSET_KEY = TARGET_OFFSET_KEY


class NoBaseline(Exception):
    """The baseline ended without a final accuracy: the relative target has nothing to resolve from."""


def offset(spec: StudySpec) -> float | None:
    """The offset this phase's target is relative to its baseline by; None: a fixed target."""
    if spec.relative_target is None:
        return None
    if spec.phase == "tune" and spec.tuning is not None and spec.tuning.target_accuracy is not None:
        return None  # the tuning phase's own (fixed) target
    return spec.relative_target


def resolved(study: optuna.Study) -> float | None:
    """The study's resolved target (None: not yet)."""
    value = study.user_attrs.get(RESOLVED_KEY)
    return float(value) if value is not None else None


def resolve_from(study: optuna.Study, result: RunResult, by: float) -> float:
    """The target from the baseline's ``result`` (its final value of the target's metric made ``by``
    better), kept on the study; the result's time to target re-read at it. NoBaseline when the
    result has no final value, or one the offset makes no target of."""
    metric = result.target_metric or ACCURACY
    final = Target(metric).of(result.final)
    if result.status != "completed" or final is None:
        raise NoBaseline(f"the baseline (trial 0) ended {result.status}: {result.reason or 'no final ' + metric}")
    value = targets.resolve(metric, final, by)
    if value is None:
        raise NoBaseline(
            f"the baseline's final {metric} {final:g} with relative_to_baseline {by:g} makes no target "
            f"({Target(metric).m.why})"
        )
    result.target_accuracy = value
    result.time_to_target = time_to_target(result.history, Target(metric, value), final)
    study.set_user_attr(RESOLVED_KEY, value)
    return value


def applied(cfg: TrainConfig, value: float) -> TrainConfig:
    """``cfg`` with its target's value ``value``, on the metric it names (``target.value`` where
    it gives one, else ``target_accuracy``)."""
    if cfg.target.value is None:
        return cfg.replace(target_accuracy=value)
    return cfg.replace(**{"target.value": value})


def wait(study: optuna.Study, poll: float = 2.0, reap: Callable[[], object] | None = None) -> float:
    """The resolved target, waiting while the baseline trains on another worker. NoBaseline when
    the baseline ended (or was never queued) without resolving it."""
    while True:
        t = resolved(study)
        if t is not None:
            return t
        base = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(BASELINE_KEY)]
        if not any(t.state in (TrialState.RUNNING, TrialState.WAITING) for t in base):
            t = resolved(study)  # it may have finished between the two reads
            if t is not None:
                return t
            raise NoBaseline("the baseline (trial 0) did not complete, so the target relative to it is unknown")
        if reap is not None:
            reap()
        time.sleep(poll)
