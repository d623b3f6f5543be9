"""Study pruners: what the study file's ``pruner:`` turns into.

Optuna's own pruning (``trial.report`` / ``should_prune``) is not implemented for
multi-objective studies, so a study pruner here is effsearch's object. The
objective calls ``begin(trial, cfg)`` before a trial trains, then the trainer
calls ``on_eval(trial, point)`` at every evaluation (its ``on_eval`` hook); a
returned reason stops the run at that evaluation and the trial ends as PRUNED,
keeping its curve and the reason.
"""

from __future__ import annotations

from typing import Protocol

from effsearch.config.options import MOASHAOptions, check_options


class StudyPruner(Protocol):
    def begin(self, trial, cfg, may_prune: bool = True) -> None:
        """A trial is about to train ``cfg``; ``may_prune`` is False for the baseline."""

    def on_eval(self, trial, point: dict) -> str | None:
        """``point``: {epoch, samples_seen, train_seconds, val_accuracy, val_loss}. A reason stops the trial."""


class NoPruner:
    def begin(self, trial, cfg, may_prune: bool = True) -> None:
        return None

    def on_eval(self, trial, point: dict) -> str | None:
        return None


class MOASHAStudyPruner:
    """MO-ASHA on a study: one RungTracker per trial, its budget the trial's own epochs."""

    def __init__(self, pruner, study):
        self.pruner, self.study = pruner, study
        self.tracker = None  # the running trial's (a worker runs one trial at a time)

    def begin(self, trial, cfg, may_prune: bool = True) -> None:
        from effsearch.search.pruner import RungTracker

        self.tracker = RungTracker(self.pruner, self.study, trial, cfg.epochs, cfg.target_accuracy,
                                   may_prune=may_prune)

    def on_eval(self, trial, point: dict) -> str | None:
        if self.tracker is None or self.tracker.trial.number != trial.number:
            return None
        return self.tracker(point)


def make_pruner(spec: dict, study=None) -> StudyPruner:
    """The pruner a study file names (``{"name": ..., knobs}``); bad knobs are a ConfigError."""
    if spec.get("name", "none") == "none":
        return NoPruner()
    from effsearch.search.pruner import MOASHAPruner

    knobs = check_options(MOASHAOptions, {k: v for k, v in spec.items() if k != "name"}, "pruner", "moasha")
    pruner = MOASHAPruner(**knobs)
    return MOASHAStudyPruner(pruner, study)
