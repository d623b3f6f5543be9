"""Stopping weak trials: the study pruner a study file's ``pruner:`` names, and ``SlowStop``, the
``max_slowdown`` limit around any of them.

- ``base``: ``StudyPruner``, what every study pruner answers (Optuna cannot prune a
  multi-objective study, so a study pruner is effsearch's object), and ``NoPruner``;
- ``moasha``: multi-objective successive halving, its rungs kept in the study's storage;
- ``slowstop``: a trial stopped once it is ``max_slowdown`` x the baseline's time to target.

``PRUNERS`` is the one registry: a name a study file's ``pruner:`` may say, the option dataclass its
options are checked against (``effsearch.config.options``) and how it is built; ``make_pruner``
builds the one a study file names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from effsearch.config.options import MOASHAOptions, Named, NoOptions, check_named
from effsearch.search.pruners.base import NoPruner, StudyPruner
from effsearch.search.pruners.moasha import MOASHAPruner, MOASHAStudyPruner, RungPoint, RungTracker, predicted_time
from effsearch.search.pruners.slowstop import SlowStop

if TYPE_CHECKING:
    import optuna

__all__ = [
    "PRUNERS",
    "PRUNER_OPTIONS",
    "MOASHAPruner",
    "MOASHAStudyPruner",
    "NoPruner",
    "PrunerKind",
    "RungPoint",
    "RungTracker",
    "SlowStop",
    "StudyPruner",
    "check_pruner",
    "make_pruner",
    "predicted_time",
]


@dataclass(frozen=True)
class PrunerKind:
    """A study pruner a study file may name: its option dataclass and ``build(options, study)``."""

    options: type
    build: Callable[[Any, optuna.Study | None], StudyPruner]


# The one registry of study pruners: a new one is a row here and its option dataclass in config/options.py.
PRUNERS: dict[str, PrunerKind] = {
    "none": PrunerKind(NoOptions, lambda options, study: NoPruner()),
    "moasha": PrunerKind(
        MOASHAOptions, lambda options, study: MOASHAStudyPruner(MOASHAPruner(**asdict(options)), study)
    ),
}


PRUNER_OPTIONS = {
    name: kind.options for name, kind in PRUNERS.items()
}  # what a study file's options are checked against


def check_pruner(value: Any, field_name: str = "pruner") -> Named[Any]:
    """A study file's ``pruner`` (a name, or a mapping with ``name`` and options), checked."""
    return check_named(value, field_name, PRUNER_OPTIONS)


def make_pruner(pruner: Named[Any], study: optuna.Study | None = None) -> StudyPruner:
    """The study pruner a study file names (``check_pruner`` checked it)."""
    return PRUNERS[pruner.name].build(pruner.options, study)
