"""A baseline per kind of device. A speed-up is read only against the baseline timed on the same
kind of GPU (``queries.baseline_for``): the same recipe on an H100 and on an A100 is two different
times, and the front is made of ratios. So a worker whose kind of device has no baseline (done,
running or queued) while the study has one queues one for its kind (``baseline_for``); a worker of
another kind that draws it from the queue hands it back untrained (FAIL with status
``other_device``, not counted), and the worker of its kind queues it again at its next trial.
Where no worker of that kind is left, the study's `status` says the kind has no baseline.
A worker draws a waiting baseline of its kind before other waiting trials (``draw_baselines_first``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optuna.trial import TrialState

from effsearch.search.store.attrs import BASELINE_FOR_KEY, BASELINE_KEY
from effsearch.search.store.queries import device_kind
from effsearch.search.store.storage import draw_first

if TYPE_CHECKING:
    import optuna

    from effsearch.search.study.spec import StudySpec

HANDED_BACK = "other_device"  # status of a kind's baseline a worker of another kind drew (untrained)


def missing(trials: list[optuna.trial.FrozenTrial], kind: str) -> bool:
    """Has the study a baseline of another kind of device, and none of ``kind`` done, running or queued?"""
    kinds, unplaced = set(), False
    for t in trials:
        if not t.user_attrs.get(BASELINE_KEY) or t.state == TrialState.FAIL:
            continue
        k = t.user_attrs.get(BASELINE_FOR_KEY) or device_kind(t)
        if k is None:
            unplaced = True  # the first baseline, not yet drawn: whichever worker draws it, its kind
        kinds.add(k)
    return not unplaced and bool(kinds) and kind not in kinds


def queue_baseline(spec: StudySpec, study: optuna.Study, kind: str) -> bool:
    """Queue a baseline for ``kind`` when the study lacks one (``missing``); True when it did."""
    if not missing(study.get_trials(deepcopy=False), kind):
        return False
    study.enqueue_trial(spec.space.encode(spec.baseline), user_attrs={BASELINE_KEY: True, BASELINE_FOR_KEY: kind})
    return True


def not_mine(trial: optuna.Trial, kind: str) -> str | None:
    """The kind a queued baseline is for, when it is not ``kind`` (None: this worker runs it)."""
    wanted = trial.user_attrs.get(BASELINE_FOR_KEY)
    return wanted if wanted is not None and wanted != kind else None


def draw_baselines_first(study: optuna.Study, kind: str | None) -> None:
    """Make ``study`` (this worker's instance) draw a waiting baseline for ``kind`` (or for any
    kind, when queued before one was placed) before the other waiting trials.

    Optuna draws waiting trials by number, and a baseline queued again (after Ctrl-C or a lost
    worker) or queued for a new kind is numbered after the warm starts and phase 1's picks
    queued before it: those would run first with no baseline to read a speed-up, a slowdown
    limit, a pruning decision or a relative target against.
    """

    def first(t: optuna.trial.FrozenTrial) -> bool:
        return bool(t.user_attrs.get(BASELINE_KEY)) and t.user_attrs.get(BASELINE_FOR_KEY) in (None, kind)

    draw_first(study, first)
