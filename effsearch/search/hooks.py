"""Hooks for the parts that come next: the pruner and the tuning phase.

Optuna's own pruning (``trial.report`` / ``should_prune``) is not implemented for
multi-objective studies, so a study pruner here is effsearch's object: it sees
every evaluation point of a running trial (through the trainer's ``on_eval``)
and the trial, and returns a reason to stop it; the trial then ends as PRUNED.
"""

from __future__ import annotations

from typing import Protocol


class StudyPruner(Protocol):
    def on_eval(self, trial, point: dict) -> str | None:
        """``point``: {epoch, samples_seen, train_seconds, val_accuracy, val_loss}. A reason stops the trial."""


class NoPruner:
    def on_eval(self, trial, point: dict) -> str | None:
        return None


def make_pruner(spec: dict, study=None) -> StudyPruner:
    # Study files accept `pruner: none` only for now (studyfile.PRUNERS).
    return NoPruner()


def after_search(spec, study) -> None:
    """The tuning phase (`tuning:` in the study file) runs here once it exists; `none` does nothing."""
    return None
