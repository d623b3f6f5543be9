"""A few changes at a time from the best configurations so far: local, evolutionary search.

Each trial starts from a parent, one of the study's completed trials (at first the baseline and
the warm starts, e.g. the recipes), picked by a tournament: ``tournament`` completed trials drawn
at random, the best of them wins. Best: a trial that meets the study's constraints (reached the
target) before one that does not, then by non-dominated rank of its values, then by its first
objective (with a target relative to the baseline, the time to its accuracy less a point); one
that missed, by how far it missed. The number of changes is drawn first (1, 2 or 3, in halving
shares: ``changes``), then which of the parent's parameters change; every other parameter keeps
the parent's value. A parameter the parent did not have (an algorithm switched on brings its
own) is drawn fresh.

Why not TPE's uniform start-up: with about 20 algorithms each on or off and learning rates drawn
over decades, a uniform draw switches many things on at once, and on the quickstart 6 of 7 such
start-up trials ended near chance. A parent that reached the accuracy and one change away is
more often a configuration that still reaches it (docs/benchmarks.md, "The anytime yardstick").

A changed number is drawn over its whole range half the time, else near the parent's value
(a normal step of ``step`` of the range, on a log scale where the range is); a changed choice is
one of the others. The random stream is the sampler's ``rng`` (``samplers.PerTrialSeed`` reseeds it
per trial, so several workers draw different streams and one worker reproduces its trials).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import StudyDirection
from optuna.trial import TrialState

from effsearch.search.pareto import fronts
from effsearch.search.store.storage import constraints_of

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.study import Study
    from optuna.trial import FrozenTrial


class LocalSampler(BaseSampler):
    """Mutate a tournament-picked completed trial in a few parameters (module docstring)."""

    def __init__(self, seed: int | None = None, changes: float = 1.0, tournament: int = 3, step: float = 0.15) -> None:
        self.rng = np.random.RandomState(seed)
        self.changes, self.tournament, self.step = changes, tournament, step
        self._random = RandomSampler(seed=seed)
        self._plan: dict[int, tuple[dict[str, Any], set[str]]] = {}  # trial number -> (parent params, changed)

    def reseed_rng(self) -> None:
        self.rng.seed()
        self._random.reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict:
        return {}

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        parent = self.parent(done, study.directions)
        if parent is None:
            self._plan[trial.number] = ({}, set())
            return
        names = sorted(parent.params)
        k = min(len(names), self.n_changes())
        changed = set(self.rng.choice(names, size=k, replace=False)) if k else set()
        self._plan[trial.number] = (dict(parent.params), changed)

    def n_changes(self) -> int:
        """1, 2, 3, ...: geometric with mean 1 + ``changes`` (each further change half as likely at 1)."""
        return 1 + int(self.rng.geometric(1.0 / (1.0 + self.changes)) - 1)

    def parent(self, done: Sequence[FrozenTrial], directions: Sequence[StudyDirection]) -> FrozenTrial | None:
        """The tournament's winner among ``done`` (None: no completed trial yet)."""
        if not done:
            return None
        ranks = _ranks(done, directions)
        size = min(self.tournament, len(done))
        drawn = self.rng.choice(len(done), size=size, replace=False)
        return done[min(drawn, key=lambda i: ranks[i])]

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        params, changed = self._plan.get(trial.number, ({}, set()))
        old = params.get(param_name)
        if param_name not in params or not _fits(param_distribution, old):
            return self.fresh(param_distribution)
        return self.mutate(old, param_distribution) if param_name in changed else old

    def fresh(self, dist: BaseDistribution) -> Any:
        if isinstance(dist, CategoricalDistribution):
            return dist.choices[self.rng.randint(len(dist.choices))]
        assert isinstance(dist, (FloatDistribution, IntDistribution))
        return self._number(dist, self.rng.uniform(0.0, 1.0))

    def mutate(self, old: Any, dist: BaseDistribution) -> Any:
        if isinstance(dist, CategoricalDistribution):
            others = [c for c in dist.choices if c != old]
            return others[self.rng.randint(len(others))] if others else old
        assert isinstance(dist, (FloatDistribution, IntDistribution))
        if self.rng.uniform() < 0.5 or not isinstance(old, (int, float)):
            return self.fresh(dist)
        u = _unit(dist, float(old)) + self.rng.normal(0.0, self.step)
        return self._number(dist, min(1.0, max(0.0, u)))

    @staticmethod
    def _number(dist: FloatDistribution | IntDistribution, u: float) -> Any:
        """The value at ``u`` in [0, 1] of the range (log where the range is), on its step."""
        lo, hi = float(dist.low), float(dist.high)
        x = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))) if dist.log else lo + u * (hi - lo)
        if dist.step is not None:
            x = lo + round((x - lo) / dist.step) * dist.step
        x = min(hi, max(lo, x))
        return int(round(x)) if isinstance(dist, IntDistribution) else x

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self._plan.pop(trial.number, None)


def _fits(dist: BaseDistribution, value: Any) -> bool:
    """Whether the parent's ``value`` is one ``dist`` can give (a study file may have narrowed it)."""
    if isinstance(dist, CategoricalDistribution):
        return any(value == c and type(value) is type(c) for c in dist.choices)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    assert isinstance(dist, (FloatDistribution, IntDistribution))
    return float(dist.low) <= value <= float(dist.high)


def _unit(dist: FloatDistribution | IntDistribution, x: float) -> float:
    lo, hi = float(dist.low), float(dist.high)
    if hi <= lo:
        return 0.0
    if dist.log:
        return (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return (x - lo) / (hi - lo)


def _ranks(done: Sequence[FrozenTrial], directions: Sequence[StudyDirection]) -> list[tuple]:
    """A sort key per trial, lower better: (missed, shortfall, front, first objective)."""
    sign = [1.0 if d == StudyDirection.MINIMIZE else -1.0 for d in directions]
    short = [sum(max(0.0, c) for c in (constraints_of(t) or ())) for t in done]
    feasible = [i for i, s in enumerate(short) if s <= 0]
    front_of = {}
    for k, front in enumerate(fronts([[s * v for s, v in zip(sign, done[i].values)] for i in feasible])):
        for j in front:
            front_of[feasible[j]] = k
    return [
        (0, 0.0, front_of[i], sign[0] * done[i].values[0]) if i in front_of else (1, short[i], 0, 0.0)
        for i in range(len(done))
    ]
