"""What every study pruner answers (``StudyPruner``), and ``NoPruner``.

Optuna's own pruning (``trial.report`` / ``should_prune``) is not implemented for
multi-objective studies, so a study pruner here is effsearch's object. The
objective calls ``begin(trial, cfg)`` before a trial trains, then the trainer
calls ``on_eval(trial, point)`` at every evaluation (its ``on_eval`` hook); a
returned reason stops the run at that evaluation and the trial ends as PRUNED,
keeping its curve and the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from optuna.trial import BaseTrial

    from effsearch.config import TrainConfig
    from effsearch.trainer.result import EvalPoint


class StudyPruner(Protocol):
    def begin(self, trial: BaseTrial, cfg: TrainConfig, may_prune: bool = True) -> None:
        """A trial is about to train ``cfg``; ``may_prune`` is False for the baseline and warm starts."""

    def on_eval(self, trial: BaseTrial, point: EvalPoint) -> str | None:
        """``point``: the trainer's evaluation. A reason stops the trial."""

    def eval_at(self, cfg: TrainConfig) -> tuple[float, ...]:
        """Epochs at which the trainer must evaluate ``cfg`` besides every ``eval_every``."""

    def eval_after(self, cfg: TrainConfig) -> tuple[float, ...]:
        """Train seconds at which the trainer must evaluate ``cfg`` (its first step at or past each)."""

    def settle(self, trial: BaseTrial, epoch: float, seconds: float, upper: float) -> bool | None:
        """A point at ``epoch`` / ``seconds`` whose accuracy is at most ``upper`` so far (part of the
        validation set scored): True if this pruner's decision there is already made, False if it
        needs the whole set, None if the point is no decision of this pruner's."""


class NoPruner:
    def begin(self, trial: BaseTrial, cfg: TrainConfig, may_prune: bool = True) -> None:
        return None

    def eval_at(self, cfg: TrainConfig) -> tuple[float, ...]:
        return ()

    def eval_after(self, cfg: TrainConfig) -> tuple[float, ...]:
        return ()

    def on_eval(self, trial: BaseTrial, point: EvalPoint) -> str | None:
        return None

    def settle(self, trial: BaseTrial, epoch: float, seconds: float, upper: float) -> bool | None:
        return None
