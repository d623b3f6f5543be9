"""Optuna samplers by the names study files use: ``SAMPLERS``, the one registry (a name, the
option dataclass its study-file options are checked against, and how it is built).

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

import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.samplers import BaseSampler

from effsearch.config.options import GPOptions, LocalOptions, Named, NoOptions, NSGAOptions, TPEOptions, check_named
from effsearch.search.study.local import LocalSampler

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.study import Study
    from optuna.trial import FrozenTrial, TrialState


def trial_seed(study_seed: int, trial_number: int) -> int:
    return int(np.random.SeedSequence([study_seed, trial_number]).generate_state(1)[0])


def _reseed(sampler: BaseSampler, seed: int, seen: set) -> None:
    """Re-seed every random state of ``sampler`` and the samplers it holds, in place (shared
    references, such as NSGA-II's child generation strategy's, follow). Optuna's samplers keep
    a NumPy RandomState behind a lazy holder's public ``rng``; it is found by that shape, not by
    importing the holder's class from a private module (storage.py is the one module that
    touches Optuna's private parts)."""
    seen.add(id(sampler))
    for i, value in enumerate(vars(sampler).values()):
        rng = value if isinstance(value, np.random.RandomState) else getattr(value, "rng", None)
        if isinstance(rng, np.random.RandomState):
            rng.seed(seed)
        elif isinstance(value, BaseSampler) and id(value) not in seen:
            _reseed(value, (seed + 7919 * (i + 1)) % 2**32, seen)


class PerTrialSeed(BaseSampler):
    """``sampler`` with its random state set from (study seed, trial number) before each trial."""

    def __init__(self, sampler: BaseSampler, seed: int) -> None:
        self.sampler, self.seed = sampler, seed

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        _reseed(self.sampler, trial_seed(self.seed, trial.number), set())
        self.sampler.before_trial(study, trial)

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.sampler.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.sampler.sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.sampler.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self.sampler.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.sampler.reseed_rng()


def _tpe(options: TPEOptions, seed: int, **extra: Any) -> BaseSampler:
    kw = asdict(options)
    if not kw["multivariate"]:
        kw["group"] = False  # group needs multivariate
    return optuna.samplers.TPESampler(seed=seed, **kw, **extra)


@dataclass(frozen=True)
class SamplerKind:
    """A sampler a study file may name: the option dataclass its options are checked against
    (``effsearch.config.options``) and ``build(options, seed, **extra)``."""

    options: type
    build: Callable[..., BaseSampler]


# The one registry of samplers: a new one is a row here and its option dataclass in config/options.py.
SAMPLERS: dict[str, SamplerKind] = {
    "tpe": SamplerKind(TPEOptions, _tpe),
    "nsga2": SamplerKind(
        NSGAOptions, lambda o, seed, **kw: optuna.samplers.NSGAIISampler(seed=seed, **asdict(o), **kw)
    ),
    "nsga3": SamplerKind(
        NSGAOptions, lambda o, seed, **kw: optuna.samplers.NSGAIIISampler(seed=seed, **asdict(o), **kw)
    ),
    "gp": SamplerKind(
        GPOptions,
        lambda o, seed, **kw: optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False, **asdict(o), **kw),
    ),
    "random": SamplerKind(NoOptions, lambda o, seed, **kw: optuna.samplers.RandomSampler(seed=seed, **kw)),
    "local": SamplerKind(LocalOptions, lambda o, seed, **kw: LocalSampler(seed=seed, **asdict(o), **kw)),
}


SAMPLER_OPTIONS = {
    name: kind.options for name, kind in SAMPLERS.items()
}  # what a study file's options are checked against


def check_sampler(value: Any, field_name: str = "sampler") -> Named[Any]:
    """A study file's ``sampler`` (a name, or a mapping with ``name`` and options), checked."""
    return check_named(value, field_name, SAMPLER_OPTIONS)


def make_sampler(sampler: Named[Any], seed: int, **extra: Any) -> BaseSampler:
    """The study file's sampler, its random stream derived per trial from ``seed`` (PerTrialSeed).
    ``extra``: the Optuna sampler's own arguments beyond a study file's options (the replay's
    variants: TPE's ``gamma``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        built = SAMPLERS[sampler.name].build(sampler.options, seed, **extra)
    return PerTrialSeed(built, seed)
