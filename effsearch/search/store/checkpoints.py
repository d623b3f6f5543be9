"""A trial's checkpoints in the study's artifact store, and the one a re-queued trial resumes from.

Each checkpoint is a file of its own in the artifact store, written whole before the trial's
``checkpoint`` attribute names it (a worker killed mid-write leaves the previous one named); the
previous file is removed then. Its name carries the trial's storage id, so that the files a killed
worker left unnamed or not yet removed are found and removed with the rest once the trial is over. A re-queued trial (its worker was lost: heartbeat.requeue_dead_local,
Optuna's retry callback) finds the last checkpoint of the trials it retries, of the same config,
and starts from it on any worker that reaches the store. Files are not optuna-dashboard
artifacts: they are the trial's state, not something to look at.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from optuna.artifacts.exceptions import ArtifactNotFound

from effsearch.search.store.attrs import CHECKPOINT_KEY
from effsearch.search.store.storage import retry_history, trial_id

if TYPE_CHECKING:
    import optuna
    from optuna.artifacts import FileSystemArtifactStore
    from optuna.trial import FrozenTrial


def save(trial: optuna.Trial, store: FileSystemArtifactStore, path: Path, facts: dict, config_hash: str) -> dict:
    """``path`` (a checkpoint file) into the store as ``trial``'s last checkpoint; returns its record."""
    previous = trial.user_attrs.get(CHECKPOINT_KEY)
    artifact_id = f"{prefix(trial_id(trial))}{uuid.uuid4().hex}.pt"
    with open(path, "rb") as f:
        store.write(artifact_id, f)
    record = {"artifact_id": artifact_id, "config_hash": config_hash, **facts}
    trial.set_user_attr(CHECKPOINT_KEY, record)  # only now does the trial name it
    if previous:
        drop(store, previous)
    return record


def prefix(storage_id: int) -> str:
    """How the names of the checkpoint files of the trial of storage id ``storage_id`` begin."""
    return f"checkpoint-{storage_id}-"


def latest(study: optuna.Study, trial: optuna.Trial, config_hash: str) -> tuple[int, dict] | None:
    """(trial number, record) of the last checkpoint ``trial`` may resume from: its own (an RDB retry
    inherits its predecessor's attributes), else that of the latest trial it retries, of the same
    config. None: nothing to resume."""
    own = trial.user_attrs.get(CHECKPOINT_KEY)
    history = retry_history(trial)
    if own and own.get("config_hash") == config_hash:
        return (history[-1] if history else trial.number), own
    trials: dict[int, FrozenTrial] = {t.number: t for t in study.get_trials(deepcopy=False)}
    for number in reversed(history):
        record = trials[number].user_attrs.get(CHECKPOINT_KEY) if number in trials else None
        if record and record.get("config_hash") == config_hash:
            return number, record
    return None


def fetch(store: FileSystemArtifactStore, record: dict, folder: Path) -> Path:
    """The checkpoint file ``record`` names, copied into ``folder``; raises ArtifactNotFound when gone."""
    dest = folder / "resume.pt"
    with store.open_reader(record["artifact_id"]) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out)
    return dest


def drop(store: FileSystemArtifactStore, record: dict) -> None:
    """Remove a checkpoint's file (gone already: nothing to do)."""
    try:
        store.remove(record["artifact_id"])
    except (ArtifactNotFound, OSError):
        pass


def sweep(folder: Path, study: optuna.Study, trial: optuna.Trial) -> None:
    """Remove every checkpoint file of ``trial`` and of the trials it retries from the artifact
    ``folder``, named or not: a worker killed between writing a file and naming it, or between
    naming it and removing the previous one, leaves one behind."""
    numbers = {*retry_history(trial), trial.number}
    ids = [trial_id(t) for t in study.get_trials(deepcopy=False) if t.number in numbers]
    for storage_id in ids:
        for path in folder.glob(f"{prefix(storage_id)}*.pt"):
            path.unlink(missing_ok=True)
