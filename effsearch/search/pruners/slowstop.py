"""``max_slowdown``: a time limit around any study pruner, read against the baseline's time to target."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from effsearch.config.metrics import Target, target_of

if TYPE_CHECKING:
    import optuna
    from optuna.trial import BaseTrial

    from effsearch.config import TrainConfig
    from effsearch.search.pruners.base import StudyPruner
    from effsearch.trainer.result import EvalPoint


class SlowStop:
    """Any study pruner, plus a time limit: a trial still short of the target once it has trained
    ``factor`` x the study baseline's time to target (train seconds, compile time included) is
    stopped there. Its time to target would be more than ``factor`` x the baseline's, which no
    one running this tool wants; on an H200 one compile + SAM + ghost-BN trial spent 208 s of a
    240 s study before its first rung (the baseline reached the target in 6.8 s). No limit until
    the baseline has a time to target; never for the baseline or a warm start.

    The limit is at least ``FLOOR`` seconds past the baseline's time: a baseline that reaches the
    target in 0.05 s puts 4x at 0.2 s, inside a loaded machine's timing noise (a test study's trial
    measured 0.18 s once and was stopped as too slow on a busy CI machine)."""

    FLOOR = 1.0  # train seconds; no real recipe's time to target is measured this finely

    def __init__(self, inner: StudyPruner, factor: float, study: optuna.Study | None) -> None:
        self.inner, self.factor, self.study = inner, factor, study
        self._base_tta: float | None = None
        self.trial: int | None = None
        self.limit: float | None = None
        self.target, self.reached = Target(), False

    @classmethod
    def mark(cls, factor: float, tta: float) -> float:
        """The train seconds past which a trial short of the target stops, for a baseline time to
        target ``tta`` (the replay benchmark applies the same rule)."""
        return max(factor * tta, tta + cls.FLOOR)

    def base_tta(self) -> float | None:
        if self._base_tta is None and self.study is not None:
            from effsearch.search.store.queries import baseline_time_to_target

            self._base_tta = baseline_time_to_target(self.study)
        return self._base_tta

    def begin(self, trial: BaseTrial, cfg: TrainConfig, may_prune: bool = True) -> None:
        self.inner.begin(trial, cfg, may_prune=may_prune)
        tta = self.base_tta() if may_prune else None
        self.trial, self.limit = trial.number, (self.mark(self.factor, tta) if tta else None)
        self.target, self.reached = target_of(cfg), False

    def eval_at(self, cfg: TrainConfig) -> tuple[float, ...]:
        return self.inner.eval_at(cfg)

    def eval_after(self, cfg: TrainConfig) -> tuple[float, ...]:
        return self.inner.eval_after(cfg) + ((self.limit,) if self.limit else ())

    def _over(self, trial: BaseTrial, seconds: float) -> bool:
        return self.limit is not None and trial.number == self.trial and not self.reached and seconds >= self.limit

    def on_eval(self, trial: BaseTrial, point: EvalPoint) -> str | None:
        reason = self.inner.on_eval(trial, point)  # first: a rung's point is recorded for the others
        if reason or trial.number != self.trial:
            return reason
        if self.target.reached(self.target.of(point)):
            self.reached = True
        if self._over(trial, point.train_seconds):
            limit, base = cast(float, self.limit), cast(float, self.base_tta())  # both set: _over holds
            return (
                f"stopped after {point.train_seconds:.1f} train seconds without reaching the target: "
                f"more than {limit / base:.3g}x the baseline's time to target "
                f"({base:.2f}s; max_slowdown in the study file)"
            )
        return None

    def settle(self, trial: BaseTrial, epoch: float, seconds: float, upper: float) -> bool | None:
        if self._over(trial, seconds) and not self.target.reached(upper):  # upper: an accuracy's bound
            return True  # stopped whatever the rest of the validation set says
        return self.inner.settle(trial, epoch, seconds, upper)
