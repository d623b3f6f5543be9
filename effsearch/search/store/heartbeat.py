"""Telling a live worker from a lost one, for storages without Optuna's heartbeats (journal files).

Who a worker is (``worker_id``, written on each trial it runs), the thread that stamps its
running trial (``JournalHeartbeat``), and the check every worker makes before asking for a
trial: fail and queue again the RUNNING trials whose worker process is gone or whose stamp
went stale (``requeue_dead_local``). RDB storages use Optuna's own heartbeats instead
(``storage.open_storage``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
from optuna.trial import TrialState

from effsearch.config.machine import host_name
from effsearch.search.store.attrs import HEARTBEAT_KEY, RETRY_HISTORY_KEY, WORKER_KEY
from effsearch.search.store.storage import mark_failed, requeue, save_note_by_id, storage_errors, why

if TYPE_CHECKING:
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial


log = logging.getLogger(__name__)

_WORKER_TOKEN = uuid.uuid4().hex[:12]  # one per process: host and pid alone repeat across machines and reboots


def worker_id() -> dict:
    host = host_name()
    return {"host": host, "pid": os.getpid(), "id": f"{host}-{os.getpid()}-{_WORKER_TOKEN}"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed child its parent has not waited for yet is a zombie: gone all the same
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class JournalHeartbeat:
    """Journal storages have no heartbeats of their own: a thread stamps the running trial
    every ``interval`` seconds, so other workers can tell a dead or hung worker's trial."""

    def __init__(self, storage: BaseStorage, interval: float) -> None:
        self.storage, self.interval = storage, interval
        self.trial_id: int | None = None
        self.failed = False  # a stamp failed (warned once)
        self._wake = threading.Event()
        threading.Thread(target=self._loop, name="effsearch-heartbeat", daemon=True).start()

    def beat(self, trial_id: int | None) -> None:
        self.trial_id = trial_id
        self._stamp()

    def _stamp(self) -> None:
        trial_id = self.trial_id
        if trial_id is None:
            return
        try:
            self.storage.set_trial_system_attr(trial_id, HEARTBEAT_KEY, time.time())
        except optuna.exceptions.UpdateFinishedTrialError:  # the trial finished meanwhile
            pass
        except storage_errors() as e:  # a stale stamp gets this trial re-queued elsewhere: say why, once
            if not self.failed:
                log.warning(
                    "cannot stamp the running trial's heartbeat (%s); other workers may take it for lost "
                    "and queue it again",
                    why(e),
                )
            self.failed = True

    def _loop(self) -> None:
        while not self._wake.wait(self.interval):
            self._stamp()


def gone(trial: FrozenTrial) -> str | None:
    """Why a RUNNING trial's worker is gone, when it ran on this host as a process that has exited
    (what ``requeue_dead_local`` re-queues first); None: alive, elsewhere, or unknown."""
    w = trial.user_attrs.get(WORKER_KEY) or {}
    host = host_name()
    if w.get("host") == host and isinstance(w.get("pid"), int) and w["pid"] != os.getpid() and not _alive(w["pid"]):
        return f"its worker ({host} pid {w['pid']}) is gone"
    return None


def requeue_dead_local(study: optuna.Study, max_retry: int = 3, grace_period: float | None = None) -> list[int]:
    """Fail and re-queue RUNNING trials whose worker is gone: a process on this host that has
    exited, or (with ``grace_period``) a worker anywhere whose heartbeat stamp is that old,
    on this host too: a live process that stopped beating (stopped, or hung holding the
    interpreter) would hold its trial forever, and the other workers wait for it. This process
    never judges its own trials (it is running this check, so it is not hung).

    Only for storages without Optuna's heartbeats (journal files); RDB storages use Optuna's own.
    """
    host = host_name()
    orphan = "its worker died before saying who it was (no heartbeat since it was asked for)"
    done = []
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    now = time.time()  # ages as of that read: the time spent failing one trial must not age the next's stamp
    for t in running:
        w = t.user_attrs.get(WORKER_KEY) or {}
        stamp = t.system_attrs.get(HEARTBEAT_KEY)
        age = now - stamp if isinstance(stamp, (int, float)) else None
        local = w.get("host") == host and isinstance(w.get("pid"), int)
        if local and w["pid"] == os.getpid():
            continue
        exited = gone(t)
        if exited:
            reason = exited
        elif grace_period is not None and age is not None and age > grace_period:
            reason = (
                (
                    f"its worker ({w.get('host')} pid {w.get('pid')}) sent no heartbeat for {age:.0f} s (grace "
                    f"period {grace_period:g} s)" + ("; its process is alive: stopped or hung" if local else "")
                )
                if w
                else orphan
            )
        elif not w and age is None and _age(t, now) > (60.0 if grace_period is None else grace_period):
            # Asked for, then its worker died before writing who it is (a worker writes that
            # right after ``ask``): nobody will ever finish it, and a surviving worker would wait
            # for it forever. Orphaned once older than the grace period (a minute without one).
            reason = orphan
        else:
            continue
        try:
            mark_failed(study, t, "lost", reason)
        except optuna.exceptions.UpdateFinishedTrialError:  # another process got there first
            continue
        if len(t.system_attrs.get(RETRY_HISTORY_KEY, [])) < max_retry:
            requeue(study, t, reason)
            reason += f"; queued again as trial {len(study.get_trials(deepcopy=False)) - 1}"
        try:
            save_note_by_id(study, t, f"### Trial {t.number}: lost\n\n{reason}")
        except storage_errors():  # mark_failed recorded the reason in its attributes; the note repeats it
            pass
        done.append(t.number)
    return done


def _age(trial: FrozenTrial, now: float) -> float:
    """Seconds since ``trial`` started (0 when it has no start time)."""
    return now - trial.datetime_start.timestamp() if trial.datetime_start else 0.0
