"""Optuna samplers by the names study files use.

TPE is the default: it handles this mixed, conditional space (``group=True``
splits it into the subspaces that occur together) and, with the constant liar,
several workers do not all sample the same point.

Seeds: a seeded sampler in each of two `effsearch run` processes (two machines) draws
the same random numbers, so both propose the same configurations. Instead, the random
stream is derived afresh for every trial from the study seed and the trial's number,
which the storage hands out once, atomically, to whichever worker on whichever machine
asks (``PerTrialSeed``). No two trials share a stream, and one worker on a fresh study
still reproduces its trials.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict

import numpy as np
import optuna
from optuna.samplers import BaseSampler
from optuna.samplers._lazy_random_state import LazyRandomState

from effsearch.config.options import TPEOptions


def trial_seed(study_seed: int, trial_number: int) -> int:
    return int(np.random.SeedSequence([study_seed, trial_number]).generate_state(1)[0])


def _reseed(sampler, seed: int, seen: set) -> None:
    """Re-seed every random state of ``sampler`` and the samplers it holds, in place (shared
    references, such as NSGA-II's child generation strategy's, follow)."""
    seen.add(id(sampler))
    for i, value in enumerate(vars(sampler).values()):
        if isinstance(value, LazyRandomState):
            value.rng.seed(seed)
        elif isinstance(value, BaseSampler) and id(value) not in seen:
            _reseed(value, (seed + 7919 * (i + 1)) % 2**32, seen)


class PerTrialSeed(BaseSampler):
    """``sampler`` with its random state set from (study seed, trial number) before each trial."""

    def __init__(self, sampler: BaseSampler, seed: int):
        self.sampler, self.seed = sampler, seed

    def before_trial(self, study, trial) -> None:
        _reseed(self.sampler, trial_seed(self.seed, trial.number), set())
        self.sampler.before_trial(study, trial)

    def infer_relative_search_space(self, study, trial):
        return self.sampler.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self.sampler.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.sampler.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study, trial, state, values) -> None:
        self.sampler.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.sampler.reseed_rng()


def make_sampler(spec: dict, seed: int) -> BaseSampler:
    """The study file's sampler, its random stream derived per trial from ``seed`` (PerTrialSeed)."""
    return PerTrialSeed(_make(spec, seed), seed)


def _make(spec: dict, seed: int):
    name = spec["name"]
    opts = {k: v for k, v in spec.items() if k != "name"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            mutate = opts.pop("mutate", 0.0)
            kw = {**asdict(TPEOptions()), **opts}
            if not kw["multivariate"]:
                kw["group"] = False  # group needs multivariate
            tpe = optuna.samplers.TPESampler(seed=seed, **kw)
            return FrontMutation(tpe, mutate, seed=seed) if mutate else tpe
        if name == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed, **opts)
        if name == "nsga3":
            return optuna.samplers.NSGAIIISampler(seed=seed, **opts)
        if name == "gp":
            return optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False, **opts)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}")


class FrontMutation(BaseSampler):
    """``base``'s proposals, except that a share ``p`` of trials copy a member of the current
    Pareto front (completed trials that met their constraints) and change a few of its
    parameters: each with probability ``rate``, at least one; numbers by a normal step of
    ``sigma`` of their (log) range, categories to another choice. Parameters the parent lacks
    (another branch of the space) are drawn at random."""

    def __init__(self, base: BaseSampler, p: float, seed: int | None = None, rate: float = 0.25,
                 sigma: float = 0.15):
        self.base, self.p, self.rate, self.sigma = base, p, rate, sigma
        self._rng = LazyRandomState(seed)
        self._random = optuna.samplers.RandomSampler(seed=seed)
        self._plan: dict[int, tuple] = {}  # trial number -> (parent, names to change)

    def before_trial(self, study, trial) -> None:
        self.base.before_trial(study, trial)
        rng = self._rng.rng
        if rng.random_sample() >= self.p:
            return
        front = _feasible_front(study)
        if not front:
            return
        parent = front[rng.randint(len(front))]
        names = sorted(parent.params)
        change = {n for n in names if rng.random_sample() < self.rate} or {names[rng.randint(len(names))]}
        self._plan[trial.number] = (parent, change)

    def infer_relative_search_space(self, study, trial):
        return {} if trial.number in self._plan else self.base.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return {} if trial.number in self._plan else self.base.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        if trial.number not in self._plan:
            return self.base.sample_independent(study, trial, param_name, param_distribution)
        parent, change = self._plan[trial.number]
        if parent.distributions.get(param_name) != param_distribution:
            return self._random.sample_independent(study, trial, param_name, param_distribution)
        value = parent.params[param_name]
        return _step(value, param_distribution, self.sigma, self._rng.rng) if param_name in change else value

    def after_trial(self, study, trial, state, values) -> None:
        self._plan.pop(trial.number, None)
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._rng.rng.seed()
        self._random.reseed_rng()
        self.base.reseed_rng()


def _feasible_front(study) -> list:
    from optuna.trial import TrialState

    from effsearch.search.pareto import fronts
    from effsearch.search.storage import constraints_of

    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if all(c <= 0 for c in (constraints_of(t) or ()))]
    if not done:
        return []
    sign = [1.0 if d == optuna.study.StudyDirection.MINIMIZE else -1.0 for d in study.directions]
    first = fronts([[s * v for s, v in zip(sign, t.values)] for t in done])[0]
    return [done[i] for i in first]


def _step(value, dist, sigma: float, rng):
    """``value`` moved by a normal step of ``sigma`` of ``dist``'s (log) range, kept inside it."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(dist, CategoricalDistribution):
        others = [c for c in dist.choices if c != value]
        return others[rng.randint(len(others))] if others else value
    if isinstance(dist, (FloatDistribution, IntDistribution)):
        f = (lambda v: math.log(v), math.exp) if dist.log else (lambda v: v, lambda v: v)
        lo, hi = f[0](dist.low), f[0](dist.high)
        x = min(max(f[0](value) + rng.normal(0.0, sigma * (hi - lo)), lo), hi)
        out = min(max(f[1](x), dist.low), dist.high)
        if dist.step is not None:
            out = dist.low + round((out - dist.low) / dist.step) * dist.step
            out = min(out, dist.high)
        return int(round(out)) if isinstance(dist, IntDistribution) else float(out)
    return value
