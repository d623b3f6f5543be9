"""Optuna samplers by the names study files use.

TPE is the default: it handles this mixed, conditional space (``group=True``
splits it into the subspaces that occur together) and, with the constant liar,
several workers do not all sample the same point. Each worker gets its own seed
(seed + worker index) for the same reason.
"""

from __future__ import annotations

import warnings

import optuna


def make_sampler(spec: dict, seed: int):
    name = spec["name"]
    opts = {k: v for k, v in spec.items() if k != "name"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            kw = {"multivariate": True, "group": True, "constant_liar": True, "n_startup_trials": 10, **opts}
            if not kw["multivariate"]:
                kw["group"] = False  # group needs multivariate
            return optuna.samplers.TPESampler(seed=seed, **kw)
        if name == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed, **opts)
        if name == "nsga3":
            return optuna.samplers.NSGAIIISampler(seed=seed, **opts)
        if name == "gp":
            return optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False, **opts)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}")
