"""effsearch: the fastest way to train your model to your accuracy, found by a multi-objective study.

The Python API (``effsearch.api``; the ``effsearch`` command is a thin layer over it)::

    import effsearch

    result = effsearch.train({"dataset": {"name": "digits"}, "model": {"name": "torchvision:resnet18"}})
    study = effsearch.run_study("studies/quickstart.yaml", n_trials=20)
    rows = effsearch.pareto_front(study)            # what `effsearch export` writes
    cfg = effsearch.best_config(study, pick="knee")  # a TrainConfig; effsearch.train(cfg) trains it

Importing effsearch is cheap: torch, Composer and Optuna load when a function needs them.
"""

from effsearch.api import (
    NothingToPick,
    StudyFailed,
    best_config,
    load_config,
    load_study,
    pareto_front,
    run_study,
    study_spec,
    train,
)
from effsearch.config import ConfigError, TrainConfig

__all__ = [
    "ConfigError",
    "NothingToPick",
    "StudyFailed",
    "TrainConfig",
    "best_config",
    "load_config",
    "load_study",
    "pareto_front",
    "run_study",
    "study_spec",
    "train",
]
