"""Where a study lives, and every write effsearch makes past Optuna's public API.

This module owns storage: parsing a storage URL, opening it (``open_storage`` for
running a study, ``open_url`` for reading one; both through ``_connect``), where a study's
artifacts go (``artifact_dir``), and the writes to a trial this process does not hold
(``mark_failed``, ``requeue``, notes on lost trials). No other module touches Optuna's
private attributes.

Default: an Optuna JournalStorage on a local file. Several worker processes
append to it under a file lock (SQLite would answer "database is locked"), and
it needs no server. For several machines: an RDB URL (PostgreSQL), with
heartbeats on, so a trial whose worker died is failed and queued again
(Optuna's RetryHeartbeatStaleTrialCallback). Journal storages have no
heartbeats of Optuna's; there effsearch stamps running trials itself and re-queues
those whose worker is gone (search/store/heartbeat.py).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY as CONSTRAINTS_KEY  # Optuna's own format
from optuna.trial import TrialState

from effsearch.config import ConfigError
from effsearch.search.store.attrs import (
    BASELINE_FOR_KEY,
    BASELINE_KEY,
    CONFIRM_CONFIG_KEY,
    CONFIRM_SEED_KEY,
    FAILED_TRIAL_KEY,
    REASON_KEY,
    RETRY_HISTORY_KEY,
    RETRY_OF_KEY,
    RETRY_REASON_KEY,
    STATUS_KEY,
    TUNE_TRIAL_KEY,
    TUNE_VALUES_KEY,
    WARM_CONFIG_KEY,
    WARM_KEY,
)
from effsearch.search.store.urls import rdb_url, sqlite_path

if TYPE_CHECKING:
    from optuna.artifacts import FileSystemArtifactStore
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial
    from sqlalchemy.engine import Dialect

    from effsearch.config.options import Heartbeat
    from effsearch.search.study.spec import StudySpec


log = logging.getLogger(__name__)


def _where(spec: StudySpec) -> str:
    return getattr(spec, "storage_field", None) or "storage"


def open_storage(spec: StudySpec, heartbeat: bool = True) -> BaseStorage:
    """The study's storage for running it; anything that stops it opening is a one-line ConfigError
    naming --storage (or the study file's ``storage``)."""
    try:
        return _open_storage(spec, heartbeat)
    except ConfigError:
        raise
    except Exception as e:  # a server that is down, a folder that is missing or read-only
        raise ConfigError(_where(spec), f"cannot open {spec.storage_label()}: {unreadable(spec.storage, e)}") from None


def unreadable(url: str, e: BaseException) -> str:
    """Why a storage did not open: for a journal file with a line that is not a record, that line
    (JSON's own "line 1 column 172" is inside the record), else the error."""
    if "://" not in url and isinstance(e, ValueError):
        from effsearch.search.store.journal import first_bad_line

        found = first_bad_line(Path(url))
        if found is not None:
            return found
    return why(e)


def check_storage(spec: StudySpec) -> None:
    """open_storage's checks, leaving no new journal file behind (the pre-flight runs before the
    data check: a study that cannot start should leave nothing)."""
    if spec.is_rdb:
        open_storage(spec, heartbeat=False)
        return
    existed = Path(spec.storage).exists()
    try:
        open_storage(spec, heartbeat=False)
    finally:  # refused or not: a journal this check made holds nothing
        if not existed:
            drop_empty_journal(spec)


def drop_empty_journal(spec: StudySpec) -> None:
    """Remove the study's journal file if it holds nothing (a journal opened, then refused)."""
    path = Path(spec.storage)
    if not spec.is_rdb and path.is_file() and path.stat().st_size == 0:
        path.unlink()


def storage_errors() -> tuple[type[Exception], ...]:
    """What a storage raises when it cannot answer: SQLAlchemy's errors (a database down, a
    connection dropped; Optuna's RDBStorage wraps those raised in a commit as its
    StorageInternalError) and OSError (a journal file or its lock)."""
    from sqlalchemy.exc import SQLAlchemyError

    return (SQLAlchemyError, optuna.exceptions.StorageInternalError, OSError)


def why(e: BaseException) -> str:
    """The first line of a database error, without SQLAlchemy's background link."""
    orig = getattr(e, "orig", None) or e
    text = " ".join(str(orig).split()) or type(orig).__name__
    return f"{type(orig).__name__}: {text}"[:300]


def _open_storage(spec: StudySpec, heartbeat: bool) -> BaseStorage:
    if spec.is_rdb:
        path = sqlite_path(spec.storage)
        if path is not None:
            _check_folder(path, spec)
        return _connect(spec.storage, spec.heartbeat if heartbeat else None)
    path = Path(spec.storage)
    _check_folder(path, spec)
    try:
        with open(path, "ab"):  # the journal is appended to: check that now, not at the first trial
            pass
        free = shutil.disk_usage(path.parent).free
    except OSError as e:
        raise ConfigError(_where(spec), f"cannot write the journal file {path}: {e.strerror or e}") from None
    if free < JOURNAL_ROOM:  # a full disk: refused before the warm-up, not at the study's first write
        raise ConfigError(
            _where(spec),
            f"the file system of the journal file {path} has {free // 1024} KB free; a journal grows by "
            f"20-40 KB a trial: free some space or give the storage another folder",
        )
    _say_stale_lock(path)
    return _connect(spec.storage)


def _say_stale_lock(path: Path) -> None:
    """A journal's lock a killed process left (a write holds it for milliseconds): Optuna takes it
    over after its 30 s grace, in silence (its warning is below the level a run shows)."""
    lock = Path(f"{path}.lock")
    try:
        age = time.time() - lock.lstat().st_mtime
    except OSError:
        return
    if age > STALE_LOCK_SECONDS and lock not in _SAID_STALE:
        _SAID_STALE.add(lock)  # once: a run opens its storage several times
        log.warning(
            "the journal's lock %s is %.0f s old, left by a process that stopped while writing: the first write "
            "waits up to 30 s and then takes it over",
            lock,
            age,
        )


STALE_LOCK_SECONDS = 5.0
_SAID_STALE: set[Path] = set()


# Free bytes a journal file's file system must have to start a run: 25-50 trials' worth (a trial
# appends 20-40 KB, its curve and attributes: a finished study's journal size over its trials).
JOURNAL_ROOM = 1 << 20


def _connect(url: str, heartbeat: Heartbeat | None = None) -> BaseStorage:
    """The one place a storage object is made: an RDB URL (with Optuna's heartbeats when
    ``heartbeat`` gives their settings) or a journal file."""
    if "://" not in url:
        from optuna.storages.journal import JournalStorage

        from effsearch.search.store.journal import MendedJournalFile

        return JournalStorage(MendedJournalFile(url))
    kwargs: dict[str, Any] = {}
    if heartbeat is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            kwargs = dict(
                heartbeat_interval=heartbeat.interval,
                grace_period=heartbeat.grace_period,
                heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                    max_retry=heartbeat.max_retry
                ),
            )
    # pool_pre_ping: a pooled connection the server closed (a restart) is replaced before use.
    engine: dict[str, Any] = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    if url.startswith("postgresql"):  # a host that drops packets: fail in seconds, not minutes
        engine["connect_args"] = {"connect_timeout": 15}
    storage = _first_open(rdb_url(url), engine, kwargs)
    if not url.startswith("sqlite"):  # after opening: a server down at the start is an error at once
        from sqlalchemy import event

        event.listen(storage.engine, "do_connect", _patient_connect)
    return storage


def _first_open(url: str, engine: dict[str, Any], kwargs: dict[str, Any]) -> ReconnectingRDBStorage:
    """The RDB storage; on an empty database each worker starting at once creates Optuna's tables,
    and the losers of that race meet the winner's (PostgreSQL: a unique violation in its catalogue,
    or a table that exists): they open again, and find them made (tests/search/test_postgres.py)."""
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    for attempt in range(SCHEMA_TRIES):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ExperimentalWarning (heartbeats)
                return ReconnectingRDBStorage(url, engine_kwargs=engine, **kwargs)
        except (IntegrityError, ProgrammingError) as e:
            if attempt == SCHEMA_TRIES - 1:
                raise
            log.debug("another worker is creating the study tables (%s); opening again", why(e))
            time.sleep(0.2 + 0.3 * attempt)
    raise AssertionError("unreachable")


SCHEMA_TRIES = 5  # opens of an empty database racing other workers to create its tables
RECONNECT_SECONDS = 60.0  # how long a new connection waits for a server that went away (a restart)
TRIES = 3  # of one storage call whose connection was cut


def _patient_connect(dialect: Dialect, conn_rec: object, cargs: tuple, cparams: dict) -> Any:
    """A new database connection, retried for up to RECONNECT_SECONDS while the server refuses it
    (restarting, starting up); SQLAlchemy's do_connect hook."""
    deadline = time.monotonic() + RECONNECT_SECONDS
    while True:
        try:
            return dialect.connect(*cargs, **cparams)
        except dialect.loaded_dbapi.OperationalError as e:
            if time.monotonic() >= deadline:
                raise
            _warn_cut(e)
            time.sleep(0.5)


_cut_warned = threading.Event()  # a lost connection is said once a process (a heartbeat thread meets it too)


def _warn_cut(e: BaseException) -> None:
    if not _cut_warned.is_set():
        _cut_warned.set()
        log.warning(
            "lost the storage's connection (%s); reconnecting, waiting up to %g s for the server, "
            "and trying the call again",
            why(e),
            RECONNECT_SECONDS,
        )


def cut_connection(e: BaseException | None) -> BaseException | None:
    """The error behind ``e`` (``e`` itself, or one it was raised from) that says a database
    connection broke: the DB-API's OperationalError (closed by the server, refused, timed out),
    or one SQLAlchemy invalidated. None: ``e`` is some other failure."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    for _ in range(10):  # Optuna wraps SQLAlchemy's error, which wraps the driver's
        if e is None:
            return None
        if isinstance(e, OperationalError) or (isinstance(e, DBAPIError) and e.connection_invalidated):
            return e
        e = e.__cause__ or e.__context__
    return None


class ReconnectingRDBStorage(optuna.storages.RDBStorage):
    """Optuna's RDBStorage that outlives a database restart: a call whose connection was cut is
    made again (up to TRIES times) on a fresh connection, which waits for the server
    (``_patient_connect``). Only calls that are safe to repeat are: reads, and writes that set a
    value. Creating a study or a trial is not repeated (a cut after its commit landed would
    make a second one, a RUNNING trial nobody owns); a cut there fails the worker, loudly."""

    def _again(self, call: Callable, *args: Any, **kwargs: Any) -> Any:
        """``call(self, *args, **kwargs)``, made again (TRIES in all) while its connection is cut,
        until a new connection has waited RECONNECT_SECONDS for the server in vain."""
        started = time.monotonic()
        for attempt in range(1, TRIES + 1):
            try:
                return call(self, *args, **kwargs)
            except storage_errors() as e:
                cut = cut_connection(e)
                if attempt == TRIES or cut is None or time.monotonic() - started > RECONNECT_SECONDS:
                    raise
                _warn_cut(cut)
                time.sleep(attempt)

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Sequence[float] | None = None) -> bool:
        """As Optuna's, tried again after a cut. A try whose commit landed before its answer was
        cut leaves the trial in ``state``, and the next try finds it finished: that is done."""
        tries: list[int] = []

        def once(storage: ReconnectingRDBStorage) -> bool:
            tries.append(1)
            try:
                return optuna.storages.RDBStorage.set_trial_state_values(storage, trial_id, state, values)
            except optuna.exceptions.UpdateFinishedTrialError:
                if len(tries) > 1 and state.is_finished() and storage.get_trial(trial_id).state == state:
                    return True
                raise

        return self._again(once)


def _repeatable(name: str) -> Callable:
    """RDBStorage's method ``name``, made again while its connection is cut."""
    method = getattr(optuna.storages.RDBStorage, name)

    @functools.wraps(method)
    def call(self: ReconnectingRDBStorage, *args: Any, **kwargs: Any) -> Any:
        return self._again(method, *args, **kwargs)

    return call


# The RDBStorage methods that open a session and may be repeated (see ReconnectingRDBStorage).
for _name in (
    "get_study_id_from_name",
    "get_study_name_from_id",
    "get_study_directions",
    "get_study_user_attrs",
    "get_study_system_attrs",
    "get_all_studies",
    "set_study_user_attr",
    "set_study_system_attr",
    "get_trial",
    "_get_trials",
    "get_trial_param",
    "get_trial_user_attrs",
    "get_trial_system_attrs",
    "get_trial_id_from_study_id_trial_number",
    "_get_best_trial_id",
    "_set_trial_param",
    "set_trial_intermediate_value",
    "set_trial_user_attr",
    "set_trial_system_attr",
    "record_heartbeat",
    "_get_stale_trial_ids",
):
    setattr(ReconnectingRDBStorage, _name, _repeatable(_name))
del _name


def _check_folder(path: Path, spec: StudySpec) -> None:
    """A storage file's folder must exist: a typo in --storage should not create folders."""
    if not path.parent.is_dir():
        what = "not a folder" if path.parent.exists() else "no such folder"
        raise ConfigError(_where(spec), f"cannot create {path.name}: {what}: {path.parent}")


# What a queued trial is (the baseline, a tuning phase's confirmation): a retry must stay it.
KEEP_ON_RETRY = (
    BASELINE_KEY,
    BASELINE_FOR_KEY,
    TUNE_TRIAL_KEY,
    TUNE_VALUES_KEY,
    CONFIRM_SEED_KEY,
    CONFIRM_CONFIG_KEY,
    WARM_KEY,
    WARM_CONFIG_KEY,
)


def requeue(study: optuna.Study, trial: FrozenTrial, reason: str) -> None:
    """Queue ``trial``'s parameters again as a WAITING trial (as Optuna's retry callback does)."""
    history = list(trial.system_attrs.get(RETRY_HISTORY_KEY, [])) + [trial.number]
    keep = {k: v for k, v in trial.user_attrs.items() if k in KEEP_ON_RETRY}
    study.add_trial(
        optuna.trial.create_trial(
            state=TrialState.WAITING,
            params=trial.params,
            distributions=trial.distributions,
            user_attrs={**keep, RETRY_OF_KEY: trial.number, RETRY_REASON_KEY: reason},
            system_attrs={FAILED_TRIAL_KEY: history[0], RETRY_HISTORY_KEY: history},
        )
    )


def draw_first(study: optuna.Study, first: Callable[[FrozenTrial], bool]) -> None:
    """Make ``study`` (this instance) draw the waiting trials ``first`` picks before the others,
    each group by number. The draw is Optuna's own (``Study._pop_waiting_trial_id``, private): the
    same claim of a WAITING trial, in another order. An Optuna without it keeps its order."""
    if not callable(getattr(study, "_pop_waiting_trial_id", None)):
        return
    storage, study_id = study._storage, study._study_id

    def pop() -> int | None:
        waiting = storage.get_all_trials(study_id, deepcopy=False, states=(TrialState.WAITING,))
        for t in sorted(waiting, key=lambda t: (not first(t), t.number)):
            try:
                if storage.set_trial_state_values(t._trial_id, state=TrialState.RUNNING):
                    return t._trial_id
            except optuna.exceptions.UpdateFinishedTrialError:  # finished by another process meanwhile
                continue
        return None

    study._pop_waiting_trial_id = pop  # type: ignore[method-assign]


def url_of(study: optuna.Study) -> str | None:
    """Where an opened Study is stored (an RDB URL or a journal file), read from Optuna's storage
    objects, which keep it private: an RDB storage comes wrapped in a cache, a journal storage
    holds its file backend. None for one in memory or a storage of another kind."""
    layer: Any = study._storage
    for _ in range(3):
        if isinstance(getattr(layer, "url", None), str):
            return layer.url
        if getattr(layer, "_file_path", None) is not None:
            return str(layer._file_path)
        layer = getattr(layer, "_backend", None)
    return None


def open_url(url: str) -> BaseStorage:
    """A storage for reading (no heartbeats): an RDB URL or a journal file (created if missing)."""
    return _connect(url)


def artifact_problem(spec: StudySpec) -> str | None:
    """Why the study's artifact folder cannot be had (None: it exists now, made if it was not)."""
    if spec.artifacts is None:
        return "this storage has no study file to put the folder beside; give `artifacts:`"
    try:
        spec.artifacts.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"cannot create {spec.artifacts}: {e.strerror or e}"
    return None


def check_artifacts(spec: StudySpec) -> None:
    """The artifact folder takes files (checkpoint_every keeps each trial's checkpoints there):
    refused before the first trial, naming the study file's ``artifacts``, when it does not."""
    problem = artifact_problem(spec)
    if problem is None:
        probe = spec.artifacts / f".effsearch-write-check-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            problem = f"cannot write in {spec.artifacts}: {e.strerror or e}"
    if problem is not None:
        raise ConfigError(
            "artifacts",
            f"{problem}; checkpoint_every keeps each trial's checkpoints there: give a folder every "
            "worker can write (on several machines, one they all reach), or checkpoint_every: null",
            spec.source,
        )


def artifact_store(spec: StudySpec) -> FileSystemArtifactStore | None:
    """The study's artifact store (None when its folder cannot be made: ``artifact_problem`` says why)."""
    from optuna.artifacts import FileSystemArtifactStore

    if artifact_problem(spec) is not None:
        return None
    return FileSystemArtifactStore(str(spec.artifacts))


# -- writes to trials, by id ---------------------------------------------------------------
def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    """Optuna's storage id of a trial (frozen or running)."""
    return trial._trial_id


def finished_elsewhere(trial: optuna.Trial) -> optuna.trial.FrozenTrial | None:
    """The stored trial when another process finished the RUNNING trial this process holds (the
    others failed it as lost: its heartbeat went stale while its process was stopped or hung),
    else None. A running trial's own writes then raise ``UpdateFinishedTrialError``."""
    stored = trial.storage.get_trial(trial._trial_id)
    return stored if stored.state.is_finished() else None


def retries_of(study: optuna.Study, number: int) -> list[int]:
    """The numbers of the trials queued to retry trial ``number`` (``requeue``, Optuna's retry callback)."""
    return [t.number for t in study.get_trials(deepcopy=False) if number in t.system_attrs.get(RETRY_HISTORY_KEY, ())]


def mark_failed(study: optuna.Study, trial: FrozenTrial, status: str, reason: str | None = None) -> None:
    """FAIL a RUNNING trial this process does not hold (its worker is gone or was interrupted),
    recording effsearch's ``status`` (and ``reason``). Raises if another process finished it first."""
    tid = trial._trial_id
    study._storage.set_trial_user_attr(tid, STATUS_KEY, status)
    if reason is not None:
        study._storage.set_trial_user_attr(tid, REASON_KEY, reason)
    study._storage.set_trial_state_values(tid, TrialState.FAIL)


def set_constraints(trial: optuna.Trial, values: list[float]) -> None:
    """Optuna's constraint values on a running trial, in its own format (its samplers and
    optuna-dashboard read them)."""
    trial.storage.set_trial_system_attr(trial._trial_id, CONSTRAINTS_KEY, values)


def constraints_of(trial: FrozenTrial) -> list[float] | None:
    """A finished trial's constraint values, as ``set_constraints`` stored them."""
    return trial.system_attrs.get(CONSTRAINTS_KEY)


def retry_history(trial: optuna.Trial | FrozenTrial) -> list[int]:
    """The trial numbers a (running or frozen) trial retries, oldest first."""
    attrs = (
        trial.system_attrs
        if isinstance(trial, optuna.trial.FrozenTrial)
        else trial.storage.get_trial_system_attrs(trial._trial_id)
    )
    return list(attrs.get(RETRY_HISTORY_KEY, ()))


def has_note(study: optuna.Study, trial: optuna.Trial | FrozenTrial) -> bool:
    """Has optuna-dashboard a note on ``trial`` (stored on the study: a finished trial cannot change)?"""
    return f"dashboard:{trial._trial_id}:note_ver" in study._storage.get_study_system_attrs(study._study_id)


def save_note_by_id(study: optuna.Study, trial: FrozenTrial, text: str) -> None:
    """The note of a trial this process does not hold (one a dead worker left behind)."""
    from types import SimpleNamespace

    from optuna_dashboard import save_note  # a required dependency: a broken install is an error

    save_note(SimpleNamespace(storage=study._storage, study=study, _trial_id=trial._trial_id), text)
