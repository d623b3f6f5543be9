"""effsearch: the fastest way to train your model to your accuracy, found by a multi-objective study.

The Python API (``effsearch.api``; the ``effsearch`` command is a thin layer over it). A
configuration, checked (defaults filled, every rule held), and trained:

    >>> import effsearch
    >>> cfg = effsearch.load_config({"dataset": {"name": "digits"}}, ["epochs=1"])
    >>> cfg.model.name, cfg.epochs
    ('tiny-cnn', 1.0)
    >>> result = effsearch.train(cfg, progress=False)    # the embedded digits: seconds on a CPU
    >>> result.status
    'completed'

A study, its front, and the config it picks (each trial trains, so this takes minutes)::

    >>> study = effsearch.run_study("studies/quickstart.yaml", n_trials=20)  # doctest: +SKIP
    >>> rows = effsearch.pareto_front(study)  # doctest: +SKIP
    >>> cfg = effsearch.best_config(study, pick="knee")  # doctest: +SKIP

``pareto_front`` holds the rows `effsearch export` writes; ``effsearch.train(cfg)`` trains the pick.

Importing effsearch is cheap: torch, Composer and Optuna load when a function needs them. What the
library says besides a run's progress goes to the ``effsearch`` logger (``logging``), silent until
configured; the ``effsearch`` command prints it.
"""

import logging

from effsearch.api import (
    Exported,
    NothingToPick,
    Picked,
    StudyFailed,
    best_config,
    export,
    load_config,
    load_study,
    pareto_front,
    run_study,
    status,
    study_spec,
    train,
    write_best,
)
from effsearch.config import ConfigError, TrainConfig
from effsearch.search.study.spec import StudySpec
from effsearch.trainer.result import RunResult

# A library's logger stays silent until its user configures logging (Python's logging HOWTO).
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "ConfigError",
    "Exported",
    "NothingToPick",
    "Picked",
    "RunResult",
    "StudyFailed",
    "StudySpec",
    "TrainConfig",
    "best_config",
    "export",
    "load_config",
    "load_study",
    "pareto_front",
    "run_study",
    "status",
    "study_spec",
    "train",
    "write_best",
]
