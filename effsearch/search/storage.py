"""Where a study lives.

Default: an Optuna JournalStorage on a local file. Several worker processes
append to it under a file lock (SQLite would answer "database is locked"), and
it needs no server. For several machines: an RDB URL (PostgreSQL), with
heartbeats on, so a trial whose worker died is failed and queued again
(Optuna's RetryHeartbeatStaleTrialCallback). Journal storages have no
heartbeats; there effsearch itself re-queues trials whose local worker process
is gone (``requeue_dead_local``).
"""

from __future__ import annotations

import os
import socket
import warnings
from pathlib import Path

import optuna
from optuna.trial import TrialState

WORKER_KEY = "worker"  # user attr: {"host", "pid"} of the process running the trial
STATUS_KEY = "status"  # user attr: effsearch's word for how the trial ended
BASELINE_KEY = "baseline"


def rdb_url(url: str) -> str:
    """SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3; use psycopg2 where only it is installed."""
    if url.startswith("postgresql://"):
        import importlib.util

        if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is not None:
            return "postgresql+psycopg2://" + url[len("postgresql://"):]
    return url


def open_storage(spec, heartbeat: bool = True):
    if spec.is_rdb:
        kwargs = {}
        if heartbeat:
            hb = spec.heartbeat
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                kwargs = dict(heartbeat_interval=hb["interval"], grace_period=hb["grace_period"],
                              heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                                  max_retry=hb["max_retry"]))
        engine = {"connect_args": {"timeout": 60}} if spec.storage.startswith("sqlite") else \
            {"pool_pre_ping": True}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(rdb_url(spec.storage), engine_kwargs=engine, **kwargs)
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    Path(spec.storage).parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(spec.storage))


def worker_id() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# What a queued trial is (the baseline, a tuning phase's confirmation): a retry must stay it.
KEEP_ON_RETRY = (BASELINE_KEY, "tune_trial", "tune_values", "confirm_seed", "confirm_config")


def requeue(study: optuna.Study, trial, reason: str) -> None:
    """Queue ``trial``'s parameters again as a WAITING trial (as Optuna's retry callback does)."""
    history = list(trial.system_attrs.get("retry_history", [])) + [trial.number]
    keep = {k: v for k, v in trial.user_attrs.items() if k in KEEP_ON_RETRY}
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.WAITING, params=trial.params, distributions=trial.distributions,
        user_attrs={**keep, "retry_of": trial.number, "retry_reason": reason},
        system_attrs={"failed_trial": history[0], "retry_history": history}))


def requeue_dead_local(study: optuna.Study, max_retry: int = 3) -> list[int]:
    """Fail and re-queue RUNNING trials whose worker was a process on this host that is gone.

    Only for storages without heartbeats (journal files); RDB storages use Optuna's own.
    """
    host = socket.gethostname()
    done = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        w = t.user_attrs.get(WORKER_KEY) or {}
        if w.get("host") != host or not isinstance(w.get("pid"), int) or _alive(w["pid"]):
            continue
        try:
            study._storage.set_trial_user_attr(t._trial_id, STATUS_KEY, "lost")
            study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        except Exception:  # another process got there first
            continue
        if len(t.system_attrs.get("retry_history", [])) < max_retry:
            requeue(study, t, f"worker pid {w['pid']} is gone")
        done.append(t.number)
    return done


def open_url(url: str):
    """A storage for reading (no heartbeats): an RDB URL or a journal file."""
    if "://" in url:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return optuna.storages.RDBStorage(rdb_url(url))
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    return JournalStorage(JournalFileBackend(url))
