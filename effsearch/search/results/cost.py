"""What a study cost, in the unit its user thinks in, and when its pick pays that back.

- **compute**: the summed wall seconds of the study's trials (set-up, training, evaluation;
  ``budget.spent``), phase 1's too when the study is phase 2 of a tuning phase;
- **baseline runs**: compute / the baseline trial's wall seconds: "the search cost N trainings
  of what I had";
- **saving**: the baseline's time to target minus the pick's (train seconds, per run);
- **break-even**: compute / saving: after that many trainings with the pick instead of the
  baseline, the search has paid for itself.

``run``, ``status``, ``export`` and ``best`` all show it from :func:`of`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, cast

from effsearch.config.arguments import said
from effsearch.search.run.budget import spent
from effsearch.search.store import queries
from effsearch.search.store.attrs import TUNE_COMPUTE_KEY, WALL_KEY

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import FrozenTrial

DEFAULT_PICK = "knee"  # `effsearch best`'s default


@dataclass(frozen=True)
class Cost:
    compute: float  # seconds, both phases
    baseline_wall: float | None = None  # the baseline trial's wall seconds
    baseline_tta: float | None = None  # the baseline's train seconds to target
    pick: int | None = None  # the picked trial's number
    pick_text: str = DEFAULT_PICK
    pick_tta: float | None = None

    @property
    def baseline_runs(self) -> float | None:
        return self.compute / self.baseline_wall if self.baseline_wall else None

    @property
    def saving(self) -> float | None:
        """Train seconds to target a run of the pick saves against the baseline (None: no pick, or
        no baseline time to target)."""
        if self.baseline_tta is None or self.pick_tta is None:
            return None
        return self.baseline_tta - self.pick_tta

    @property
    def break_even(self) -> float | None:
        """Runs of the pick that pay the study back (None: it saves nothing per run)."""
        s = self.saving
        return self.compute / s if s is not None and s > 0 else None

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "baseline_runs": self.baseline_runs,
            "saving": self.saving,
            "break_even": self.break_even,
        }

    def lines(self) -> list[str]:
        runs = self.baseline_runs
        first = f"cost: {self.compute:.1f} s of compute" + (
            f" = {runs:.1f} runs of the baseline (its trial took {self.baseline_wall:.1f} s)" if runs else ""
        )
        if self.pick is None:
            pick = said(f"--pick={self.pick_text}")
            return [first, f"  no trial satisfies {pick} yet: nothing to pay it back with"]
        s = self.saving
        if s is None:
            return [first, "  the baseline has no time to target: no saving to read"]
        if s <= 0:
            return [
                first,
                f"  the {self.pick_text} pick (trial {self.pick}) is no faster to the target than the "
                "baseline: nothing to pay it back with",
            ]
        return [
            first,
            f"  the {self.pick_text} pick (trial {self.pick}) reaches the target {s:.1f} s sooner a run "
            f"({self.baseline_tta:.1f} s -> {self.pick_tta:.1f} s): the study pays for itself after "
            f"{math.ceil(cast(float, self.break_even))} runs",
        ]


def earlier_compute(study: Study) -> float:
    """The summed wall seconds of phase 1's trials, recorded on phase 2's study (0: no phase 1)."""
    return float(study.user_attrs.get(TUNE_COMPUTE_KEY) or 0.0)


def of(study: Study, trial: FrozenTrial | None = None, pick_text: str = DEFAULT_PICK) -> Cost:
    """The study's cost, and the saving of ``trial`` (a pick's, named ``pick_text``; None: no pick)
    against the baseline trial. ``effsearch.search.results.best.cost_of`` picks the trial first."""
    trials = study.get_trials(deepcopy=False)
    compute = spent(trials) + earlier_compute(study)
    objectives = queries.objectives_of(study)
    base = queries.baseline_trial(trials)
    return Cost(
        compute=compute,
        baseline_wall=base.user_attrs.get(WALL_KEY) if base is not None else None,
        baseline_tta=_tta(base, objectives),
        pick=trial.number if trial is not None else None,
        pick_text=pick_text,
        pick_tta=_tta(trial, objectives),
    )


def _tta(trial: FrozenTrial | None, objectives: list[str]) -> float | None:
    if trial is None:
        return None
    tta, _, hit = queries.measures(trial, objectives)
    return tta if hit else None
