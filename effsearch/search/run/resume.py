"""A trial's checkpoints, from the study's side: taken every ``checkpoint_every`` seconds of training
into the artifact store, and the one a re-queued trial resumes from.

``TrialCheckpoints`` wraps one trial's training. It finds the last checkpoint of the trial this one
retries (a lost worker's, or one interrupted by Ctrl-C; the same config), fetches it, hands the
trainer its hooks (``trainer.hooks.Checkpoints``), records how the trial was resumed, and removes
the files once the trial is over. With each checkpoint it writes the trial's wall seconds so far,
so a worker killed after it has that segment counted by the study's budget, once: the retry's
own wall seconds start when it starts, while its time to target sums the training of every
segment (trainer/checkpoint.py carries the clock).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from optuna.artifacts.exceptions import ArtifactNotFound

from effsearch.search.store import checkpoints
from effsearch.search.store.attrs import (
    CHECKPOINT_ERROR_KEY,
    CHECKPOINT_SKIPPED_KEY,
    RESTORE_KEY,
    RESUMED_KEY,
    SEGMENTS_KEY,
    WALL_KEY,
)
from effsearch.trainer.hooks import Checkpoints

if TYPE_CHECKING:
    from collections.abc import Callable

    import optuna
    from optuna.artifacts import FileSystemArtifactStore

    from effsearch.config import TrainConfig
    from effsearch.trainer.result import RunResult


class TrialCheckpoints:
    """One trial's checkpoints: ``with TrialCheckpoints(...) as saved:`` train with ``saved.hooks()``,
    then ``saved.note(result)``; ``saved.finish()`` once the trial is over (trained, or failed for a
    reason of its own). Interrupted, or taken over by the other workers, a trial is queued again and
    its retry resumes from its checkpoints: then nothing calls ``finish`` and they stay.

    ``wall()``: the trial's wall seconds so far; ``warn(kind, text)``: said once a worker."""

    def __init__(
        self,
        study: optuna.Study,
        trial: optuna.Trial,
        cfg: TrainConfig,
        store: FileSystemArtifactStore | None,
        folder: Path,
        every: float | None,
        wall: Callable[[], float],
        warn: Callable[[str, str], None],
    ) -> None:
        self.study, self.trial, self.hash, self.store, self.every = study, trial, cfg.hash(), store, every
        self.folder = folder  # the store's folder: the files a killed worker left are found there
        self.wall, self.warn = wall, warn
        self.tmp: tempfile.TemporaryDirectory | None = None
        self.resume: tuple[int, dict] | None = None  # (the trial that saved it, its record)
        self.path: Path | None = None

    def __enter__(self) -> TrialCheckpoints:
        if self.store is None:  # no artifact folder (refused before trial 0 when checkpoint_every is set)
            return self
        self.resume = checkpoints.latest(self.study, self.trial, self.hash)
        if self.resume is None and self.every is None:
            return self
        self.tmp = tempfile.TemporaryDirectory(prefix="effsearch-resume-")
        if self.resume is not None:
            try:
                self.path = checkpoints.fetch(self.store, self.resume[1], Path(self.tmp.name))
            except (ArtifactNotFound, OSError) as e:
                self.warn(
                    "resume",
                    f"trial {self.trial.number} retries trial {self.resume[0]} but cannot read its checkpoint "
                    f"({type(e).__name__}: {e}); it trains from the start",
                )
                self.resume = None
        return self

    def hooks(self) -> Checkpoints | None:
        """What the trainer is asked to do: save every ``checkpoint_every`` s, start from a checkpoint."""
        if self.every is None and self.path is None:
            return None
        save = self._save if self.every is not None and self.store is not None else None
        return Checkpoints(every=self.every, save=save, resume=self.path)

    def _save(self, path: Path, facts: dict) -> None:
        """The trial's wall seconds so far (a lost segment's cost), then a checkpoint into the store.
        One that cannot be saved is a warning and the trial's ``checkpoint_error``: training goes on."""
        assert self.store is not None  # hooks() passes _save only with a store
        try:  # the wall seconds first: a worker killed in between has them counted, not missed
            self.trial.set_user_attr(WALL_KEY, self.wall())
            checkpoints.save(self.trial, self.store, path, facts, self.hash)
        except (OSError, ValueError) as e:
            self.trial.set_user_attr(CHECKPOINT_ERROR_KEY, f"{type(e).__name__}: {e}"[:2000])
            self.warn("checkpoint", f"trial {self.trial.number}'s checkpoint was not saved: {e}")

    def note(self, result: RunResult) -> None:
        """How the trial was resumed (from which trial's checkpoint, the restore's seconds, segments),
        or why it took no checkpoint."""
        extra = result.final.extra
        if self.resume is not None and self.path is not None:
            number, record = self.resume
            facts = {k: record.get(k) for k in ("epoch", "step", "train_seconds")}
            self.trial.set_user_attr(RESUMED_KEY, {"trial": number, **facts})
            self.trial.set_user_attr(RESTORE_KEY, extra.get("restore_seconds"))
            self.trial.set_user_attr(SEGMENTS_KEY, extra.get("segments"))
        if extra.get(CHECKPOINT_SKIPPED_KEY):
            self.trial.set_user_attr(CHECKPOINT_SKIPPED_KEY, extra[CHECKPOINT_SKIPPED_KEY])

    def finish(self) -> None:
        """The trial is over: its checkpoint files, and those of the trials it retries, are removed."""
        if self.store is None:
            return
        try:
            checkpoints.sweep(self.folder, self.study, self.trial)
        except OSError as e:  # a file left is disk space, not a wrong result
            self.warn("checkpoint", f"trial {self.trial.number}'s checkpoint files were not all removed: {e}")

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self.tmp is not None:
            self.tmp.cleanup()
