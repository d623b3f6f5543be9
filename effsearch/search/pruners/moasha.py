"""Multi-objective successive halving (MO-ASHA, Schmucker et al. 2021).

Optuna cannot prune multi-objective studies (``Trial.report`` raises), so
effsearch decides itself. Rungs sit at geometric fractions of the epoch budget
(``min_fraction * eta**k``). When a trial reaches a rung, it is ranked among all
trials that reached that rung so far by non-dominated sorting, ties broken by
crowding distance so the front stays spread; it goes on if it is in the best
``1/eta``, and only once ``min_trials`` trials have been seen there.

What the time objective means at a rung (``rank``): time to target is not known
yet for a trial still below the target.

- ``predicted`` (default): the time the curve so far predicts: the seconds at
  which it reached the target, else the last slope extended to the target
  (capped at 10x the run's projected seconds). Within a front the more accurate
  trial goes first. Nobody is kept for having spent the least so far.
- ``spent``: the seconds spent so far, a lower bound, ties by crowding distance.
  Near chance accuracy this ranks on seconds spent alone, and whoever is cheapest
  so far is a front end with infinite crowding: on the Fashion-MNIST replay it
  pruned the two best rows in half the seeds (research/README.md: the replay).

Either way a slow but accurate trial is pruned only if another is both faster
*and* more accurate at the same point of the budget, never for being slow alone.

Where the rung sits (``clock``):

- ``budget`` (default): rungs at ``min_fraction * eta**k`` of each trial's epochs,
  ranked as ``rank`` says.
- ``time``: one rung at ``time_fraction`` of the baseline's time to
  target, in train seconds: every trial is judged at the same second of training,
  on its validation accuracy there, and goes on if in the best ``1/eta``. The time
  objective asks what a curve has reached by a given second; a share of each
  trial's own budget (0.2 epochs of a 2-epoch trial, 0.7 of a 6-epoch one) does
  not. The baseline's point there (read from its curve) is a peer. Until the
  baseline has a time to target (it is still training, or missed), trials use
  the budget rungs. A trial whose budget ends before the rung is never judged.
  Not the default: it ranks on speed alone, and on the Fashion-MNIST study one of its two
  runs kept no recipe within a point of the baseline's accuracy (docs/results.md, earlier studies).

State lives in the study's storage as trial user attributes (``rung_K``), so
every worker and machine sees the same rungs, and a resumed study too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from effsearch.config.metrics import ACCURACY, Target, target_of
from effsearch.config.options import MOASHAOptions, check_options
from effsearch.search.store.attrs import HISTORY_KEY, TIME_RUNG_KEY, TIME_TO_TARGET_KEY, rung_key
from effsearch.trainer.result import EvalPoint

if TYPE_CHECKING:
    import optuna
    from optuna.trial import BaseTrial

    from effsearch.config import TrainConfig


class MOASHAStudyPruner:
    """MO-ASHA on a study: one RungTracker per trial, its budget the trial's own epochs."""

    def __init__(self, pruner: MOASHAPruner, study: optuna.Study | None) -> None:
        self.pruner, self.study = pruner, study
        self.tracker: RungTracker | None = None  # the running trial's (a worker runs one trial at a time)
        # clock time: (seconds, the baseline's accuracy there), once known
        self._time_rung: tuple[float, float | None] | None = None

    def time_rung(self) -> tuple[float, float | None] | None:
        """Clock ``time``: the rung's train seconds and the baseline's score (``Target.score``: its
        val accuracy, or its loss negated) at its first evaluation at or past them (None when it
        recorded its own point there); None until the
        study's baseline has completed with a time to target."""
        if self.pruner.clock != "time" or self.study is None:
            return None
        if self._time_rung is None:
            from optuna.trial import TrialState

            from effsearch.search.store.queries import baseline_trial, study_target

            base = baseline_trial(self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
            tta = base.user_attrs.get(TIME_TO_TARGET_KEY) if base is not None else None
            if tta:
                assert base is not None  # a time to target is a baseline's
                mark = self.pruner.time_fraction * tta
                hist = base.user_attrs.get(HISTORY_KEY) or []
                p = next((p for p in hist if p.get("train_seconds", 0.0) >= mark), None)
                own = TIME_RUNG_KEY in base.user_attrs
                target = study_target(self.study) or Target()
                value = None if own or p is None else target.of(EvalPoint.from_dict(p))
                self._time_rung = (mark, None if value is None else target.score(value))
        return self._time_rung

    def begin(self, trial: BaseTrial, cfg: TrainConfig, may_prune: bool = True) -> None:
        rung = self.time_rung()
        self.tracker = RungTracker(
            self.pruner, self.study, trial, cfg.epochs, target_of(cfg), may_prune=may_prune, time_rung=rung
        )

    def on_eval(self, trial: BaseTrial, point: EvalPoint) -> str | None:
        if self.tracker is None or self.tracker.trial.number != trial.number:
            return None
        return self.tracker(point)

    def settle(self, trial: BaseTrial, epoch: float, seconds: float, upper: float) -> bool | None:
        if self.tracker is None or self.tracker.trial.number != trial.number:
            return None
        return self.tracker.settle(epoch, seconds, upper)

    def eval_at(self, cfg: TrainConfig) -> tuple[float, ...]:
        """Every budget rung gets its own evaluation. Without one a rung was decided at the next
        ``eval_every`` point: with the default (1 epoch) and the quickstart's 2-6 epochs, the
        first rung (1/9) sat at 1/6-1/2 of the budget, where a stop saves a third as much."""
        if self.tracker is not None and self.tracker.time_rung is not None:
            return ()
        return tuple(r * cfg.epochs for r in self.pruner.rungs())

    def eval_after(self, cfg: TrainConfig) -> tuple[float, ...]:
        """Train seconds at which the trainer must evaluate: the time rung, once it is known."""
        if self.tracker is not None and self.tracker.time_rung is not None:
            return (self.tracker.time_rung[0],)
        return ()


@dataclass
class RungPoint:
    time_bound: float  # time to target if reached, else predicted (rank: predicted) or spent so far
    score: float  # the target's metric, higher is better: a val accuracy, a loss negated (Target.score)
    reached: bool

    def objectives(self) -> tuple[float, float]:
        """Both minimised. An unreached trial's bound is optimistic: it is never
        dominated in time by a trial that only reached the target later."""
        return (self.time_bound, -self.score)

    def to_attr(self) -> list:
        return [self.time_bound, self.score, self.reached]

    @classmethod
    def from_attr(cls, v: list) -> RungPoint:
        return cls(float(v[0]), float(v[1]), bool(v[2]))


def predicted_time(
    seconds: float,
    score: float,
    fraction_done: float,
    target: float,
    previous: tuple[float, float] | None,
    start: float | None = 0.0,
) -> float:
    """Time to ``target`` the curve predicts at (``seconds``, ``score``; scores rise towards the
    target: an accuracy, a loss negated), ``fraction_done`` of the budget in: the slope since
    ``previous`` (seconds, score; else since ``start`` at 0 s: an accuracy starts at 0, a loss at no
    known value, None) extended to the target, capped at 10x the run's projected seconds (a flat
    or falling curve, or one with no slope to read, gets the cap)."""
    if score >= target:
        return seconds
    cap = 10 * seconds / max(fraction_done, 1e-9)
    if previous is None and start is None:
        return cap
    t0, a0 = previous if previous is not None else (0.0, float(start or 0.0))
    rate = (score - a0) / max(seconds - t0, 1e-9)
    return min(seconds + (target - score) / rate, cap) if rate > 0 else cap


_DEFAULT = MOASHAOptions()  # the one home of the defaults (a study file's and this class's)


class MOASHAPruner:
    # A trial at a rung that has reached the target sooner than every peer that has is kept, whatever
    # its rank: its time to target is final and the front's fast end, which a prune can only lose
    # (on studies/debian-lm.yaml the fastest trial to the loss target, 15.6 s against the front's
    # 19.0 s, was pruned for its loss at a rung earlier than its peers'). The replay measures it
    # off beside on (research/replay/methods.py, "/no-keep-fastest").
    keep_fastest = True

    def __init__(
        self,
        eta: float = _DEFAULT.eta,
        min_fraction: float = _DEFAULT.min_fraction,
        min_trials: int = _DEFAULT.min_trials,
        rank: str = _DEFAULT.rank,
        clock: str = _DEFAULT.clock,
        time_fraction: float = _DEFAULT.time_fraction,
    ) -> None:
        # The knobs' bounds are MOASHAOptions' (a ConfigError naming pruner.KNOB), for a study file's
        # knobs and for a pruner built in code alike.
        check_options(
            MOASHAOptions,
            {
                "eta": eta,
                "min_fraction": min_fraction,
                "min_trials": min_trials,
                "rank": rank,
                "clock": clock,
                "time_fraction": time_fraction,
            },
            "pruner",
        )
        self.rank, self.clock, self.time_fraction = rank, clock, time_fraction
        self.eta, self.min_fraction, self.min_trials = eta, min_fraction, min_trials

    def rungs(self) -> list[float]:
        """Rung positions as fractions of the budget (the end itself is no rung, nor is a point in
        its last 1%: ``min_fraction: 0.111`` with eta 9 would put one at 0.999, a stop there saves
        nothing)."""
        out, r = [], self.min_fraction
        while r < 0.99:
            out.append(r)
            r *= self.eta
        return out

    def rung_of(self, fraction_done: float) -> int | None:
        """The highest rung at or below ``fraction_done``."""
        hit = [k for k, r in enumerate(self.rungs()) if fraction_done >= r - 1e-9]
        return hit[-1] if hit else None

    def decide(self, me: RungPoint, peers: list[RungPoint]) -> bool:
        """True: keep ``me``. ``peers`` are the other trials' points at the same rung."""
        points = [me, *peers]
        if len(points) < self.min_trials:
            return True
        from effsearch.search.pareto import fronts, rank

        if self.keep_fastest and me.reached and all(me.time_bound < p.time_bound for p in peers if p.reached):
            return True
        objs = [p.objectives() for p in points]
        if self.rank == "spent":
            order = rank(objs)
        else:  # front by front, the more accurate first: no infinite crowding at the ends
            order = [i for f in fronts(objs) for i in sorted(f, key=lambda i: (objs[i][1], objs[i][0], i))]
        keep = max(1, math.ceil(len(points) / self.eta))
        return 0 in order[:keep]

    # -- the study side: state in trial attributes ------------------------------------
    def check(
        self,
        study: optuna.Study | None,
        trial: BaseTrial,
        k: int,
        me: RungPoint,
        may_prune: bool = True,
        target: Target | None = None,
    ) -> str | None:
        """``trial`` reached rung ``k`` at ``me``; returns a reason to prune, or None. With
        ``may_prune`` False (the baseline) the point is recorded for the others only."""
        key = rung_key(k)
        if key in getattr(trial, "user_attrs", {}):
            return None  # decided before (a retried or resumed trial keeps its first verdict)
        trial.set_user_attr(key, me.to_attr())
        if not may_prune:
            return None
        peers = [RungPoint.from_attr(v) for v in self.peers(study, trial, key)]
        if self.decide(me, peers):
            return None
        # short, its values whole: `status` shows a reason's first 120 characters
        return (
            f"pruned at rung {k} ({self.rungs()[k]:.3g} of budget), not in best 1/{self.eta:g} "
            f"of {len(peers) + 1}: {self._time_label(me)} {me.time_bound:.1f}s, {said(me.score, target)}"
        )

    @staticmethod
    def peers(study: optuna.Study | None, trial: BaseTrial, key: str) -> list:
        """The other trials' records under ``key`` (their points at one rung)."""
        assert study is not None  # ranking among peers needs the study (make_pruner's study)
        return [
            t.user_attrs[key]
            for t in study.get_trials(deepcopy=False)
            if t.number != trial.number and key in t.user_attrs
        ]

    def keep_by_accuracy(self, score: float, peers: list[float]) -> bool:
        """True: keep a trial at ``score`` (an accuracy, a loss negated) among ``peers`` (the others'
        scores at the same rung): fewer than ``ceil(n / eta)`` of them are better (ASHA)."""
        n = len(peers) + 1
        if n < self.min_trials:
            return True
        return sum(1 for p in peers if p > score) < max(1, math.ceil(n / self.eta))

    def check_time(
        self,
        study: optuna.Study | None,
        trial: BaseTrial,
        seconds: float,
        score: float,
        base_score: float | None,
        may_prune: bool = True,
        target: Target | None = None,
    ) -> str | None:
        """``trial`` reached the time rung at ``seconds`` with ``score``; a reason to prune, or
        None. ``base_score``: the baseline's score there, when it has no point of its own."""
        if TIME_RUNG_KEY in getattr(trial, "user_attrs", {}):
            return None  # decided before (a retried or resumed trial keeps its first verdict)
        trial.set_user_attr(TIME_RUNG_KEY, [seconds, score])
        if not may_prune:
            return None
        peers = self.time_peers(study, trial, base_score)
        if self.keep_by_accuracy(score, peers):
            return None
        return (
            f"pruned at {seconds:.2f} train seconds ({self.time_fraction:g} of the baseline's time to "
            f"target): {said(score, target)} not in the best 1/{self.eta:g} of {len(peers) + 1} "
            f"trials there"
        )

    def time_peers(self, study: optuna.Study | None, trial: BaseTrial, base_score: float | None) -> list[float]:
        """The scores ``trial`` is ranked among at the time rung (the baseline's too)."""
        peers = [float(v[1]) for v in self.peers(study, trial, TIME_RUNG_KEY)]
        return peers + ([base_score] if base_score is not None else [])

    def _time_label(self, me: RungPoint) -> str:
        if me.reached:
            return "time to target"
        return "predicted time to target" if self.rank == "predicted" else "seconds so far"


def said(score: float, target: Target | None) -> str:
    """A score as the metric's value, named: ``val loss 2.3456`` (no target: a val accuracy)."""
    t = target or Target()
    return f"{t.m.label} {t.unscore(score):.4f}"


class RungTracker:
    """Feeds one trial's evaluation points to the pruner, with time-to-target so far."""

    def __init__(
        self,
        pruner: MOASHAPruner,
        study: optuna.Study | None,
        trial: BaseTrial,
        budget_epochs: float,
        target: float | Target,
        may_prune: bool = True,
        time_rung: tuple[float, float | None] | None = None,
    ) -> None:
        self.pruner, self.study, self.trial, self.may_prune = pruner, study, trial, may_prune
        # A number is a val accuracy; points are ranked on the target's score (a loss negated).
        self.goal = target if isinstance(target, Target) else Target(ACCURACY, float(target))
        self.budget, self.target = budget_epochs, self.goal.score(self.goal.value)
        self.start = 0.0 if self.goal.metric == ACCURACY else None  # an untrained model's score, where known
        self.time_rung = time_rung  # (seconds, the baseline's score there): judged there, not at budget rungs
        self.reached_seconds: float | None = None
        self.previous: tuple[float, float] | None = None  # the evaluation before this one
        self.seen: set = set()  # rungs decided: their indices, and "time"
        self._peers: tuple | None = None  # (rung key, its peers) read for the point being scored

    def __call__(self, point: EvalPoint) -> str | None:
        self._peers = None
        if self.time_rung is not None:
            return self._at_time(point)
        score = self._score(point)
        if self.reached_seconds is None and score >= self.target:
            self.reached_seconds = point.train_seconds
        previous, self.previous = self.previous, (point.train_seconds, score)
        k = self._rung(point.epoch)
        if k is None:
            return None
        self.seen.add(k)
        me = self._point(point.epoch, point.train_seconds, score, previous)
        return self.pruner.check(self.study, self.trial, k, me, self.may_prune, self.goal)

    def _score(self, point: EvalPoint) -> float:
        value = self.goal.of(point)
        return self.goal.score(value) if value is not None and math.isfinite(value) else -math.inf

    def settle(self, epoch: float, seconds: float, upper: float) -> bool | None:
        """A rung's point scored on part of the validation set, its accuracy at most ``upper``: True
        if it is pruned even at ``upper`` (the decision is monotone in accuracy: a more accurate
        point is never ranked worse), False if it may be kept (scored whole: its record is the
        others' peer). The baseline and warm starts are scored whole (the yardstick's curve)."""
        if not self.may_prune:
            return False
        if self.time_rung is not None:
            s, base_accuracy = self.time_rung
            if (
                "time" in self.seen
                or seconds < s
                or epoch / self.budget >= 0.99
                or TIME_RUNG_KEY in self.trial.user_attrs
            ):
                return None
            return not self.pruner.keep_by_accuracy(upper, self._read(TIME_RUNG_KEY, base_accuracy))
        k = self._rung(epoch)
        if k is None or rung_key(k) in self.trial.user_attrs:
            return None
        me = self._point(epoch, seconds, upper, self.previous)
        return not self.pruner.decide(me, [RungPoint.from_attr(v) for v in self._read(rung_key(k))])

    def _read(self, key: str, base_accuracy: float | None = None) -> list:
        """The peers at ``key``, read once for all the questions about one point."""
        if self._peers is None or self._peers[0] != key:
            peers = (
                self.pruner.time_peers(self.study, self.trial, base_accuracy)
                if key == TIME_RUNG_KEY
                else self.pruner.peers(self.study, self.trial, key)
            )
            self._peers = (key, peers)
        return self._peers[1]

    def _rung(self, epoch: float) -> int | None:
        """The budget rung a point at ``epoch`` decides, if any not decided yet."""
        # Epochs come rounded to 4 places; the point the trainer placed at a rung may read a hair short.
        k = self.pruner.rung_of(epoch / self.budget + 5e-5 / self.budget)
        return None if k is None or k in self.seen else k

    def _point(self, epoch: float, seconds: float, accuracy: float, previous: tuple[float, float] | None) -> RungPoint:
        reached = self.reached_seconds is not None or accuracy >= self.target
        if self.reached_seconds is not None:
            t = self.reached_seconds
        elif reached:
            t = seconds
        elif self.pruner.rank == "predicted":
            t = predicted_time(seconds, accuracy, epoch / self.budget, self.target, previous, self.start)
        else:
            t = seconds
        return RungPoint(t, accuracy, reached)

    def _at_time(self, point: EvalPoint) -> str | None:
        assert self.time_rung is not None  # called on a time rung only
        seconds, base_accuracy = self.time_rung
        if "time" in self.seen or point.train_seconds < seconds:
            return None
        self.seen.add("time")
        if point.epoch / self.budget >= 0.99:  # its budget ended first: nothing left to save
            return None
        return self.pruner.check_time(
            self.study, self.trial, point.train_seconds, self._score(point), base_accuracy, self.may_prune, self.goal
        )
