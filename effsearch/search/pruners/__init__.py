"""Stopping weak trials: the study pruner a study file's ``pruner:`` names, and ``SlowStop``, the
``max_slowdown`` limit around any of them.

- ``base``: ``StudyPruner``, what every study pruner answers (Optuna cannot prune a
  multi-objective study, so a study pruner is effsearch's object), and ``NoPruner``;
- ``moasha``: multi-objective successive halving, its rungs kept in the study's storage;
- ``slowstop``: a trial stopped once it is ``max_slowdown`` x the baseline's time to target.

``make_pruner`` builds the one a study file names (``PRUNERS``: name -> class, the one registry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from effsearch.config.options import MOASHAOptions, check_options
from effsearch.search.pruners.base import NoPruner, StudyPruner
from effsearch.search.pruners.moasha import MOASHAPruner, MOASHAStudyPruner, RungPoint, RungTracker, predicted_time
from effsearch.search.pruners.slowstop import SlowStop

if TYPE_CHECKING:
    import optuna

__all__ = [
    "MOASHAPruner",
    "MOASHAStudyPruner",
    "NoPruner",
    "RungPoint",
    "RungTracker",
    "SlowStop",
    "StudyPruner",
    "make_pruner",
    "predicted_time",
]


def make_pruner(spec: dict, study: optuna.Study | None = None) -> StudyPruner:
    """The pruner a study file names (``{"name": ..., knobs}``); bad knobs are a ConfigError."""
    if spec.get("name", "none") == "none":
        return NoPruner()
    knobs = check_options(MOASHAOptions, {k: v for k, v in spec.items() if k != "name"}, "pruner", "moasha")
    pruner = MOASHAPruner(**knobs)
    return MOASHAStudyPruner(pruner, study)
