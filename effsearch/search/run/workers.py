"""Worker processes: each runs trials one after another on the study's storage.

Trials run in-process (starting Python with Composer costs ~25 s, a quickstart
trial a few seconds); ``--workers K`` starts K worker processes on the same storage,
and several machines are just several `effsearch run` on one PostgreSQL URL (Optuna's
own distributed mode). A worker warms up first, stops at the study's n_trials (counting
trials running elsewhere), re-queues the trials of workers that died, and on Ctrl-C
puts its own running trial back in the queue.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import logging
import multiprocessing
import os
import signal
import sys
import time
import warnings
from logging.handlers import QueueHandler, QueueListener
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import optuna
from optuna.trial import TrialState

from effsearch.config import ConfigError, TrainConfig
from effsearch.config.machine import check_runnable, device_record, free_workers, worker_devices
from effsearch.search.run import kinds
from effsearch.search.run.budget import StopAtBudget, StopAtTotal, StopOnRepeatedFailure
from effsearch.search.run.objective import Objective, TrainFn, TrialFailed, free_memory, trainer
from effsearch.search.run.progress import Progress
from effsearch.search.store import queries
from effsearch.search.store.attrs import (
    COUNTED_FAIL,
    INTERRUPTED_REASON,
    RETRY_HISTORY_KEY,
    RETRY_OF_KEY,
    STATUS_KEY,
    WORKER_KEY,
)
from effsearch.search.store.heartbeat import JournalHeartbeat, requeue_dead_local, worker_id
from effsearch.search.store.signals import handled_by, signals_put_off
from effsearch.search.store.storage import (
    artifact_store,
    has_note,
    mark_failed,
    open_storage,
    requeue,
    save_note_by_id,
    storage_errors,
    why,
)
from effsearch.search.study import phases
from effsearch.search.study.samplers import make_sampler

if TYPE_CHECKING:
    from collections.abc import Callable

    from optuna.trial import FrozenTrial

    from effsearch.search.study.spec import StudySpec


log = logging.getLogger(__name__)

WARM_UP_BATCHES = 8  # enough to import, allocate and pick kernels; ~1 s on a CPU for the quickstart


def warm_up(cfg: TrainConfig, data_root: str | Path | None = None, train_fn: TrainFn | None = None) -> float:
    """Train ``cfg`` for a few batches, untimed, so the process's first timed trial is not its slowest.

    The first run of a process pays lazy imports, allocator growth and kernel choice in its
    train seconds (benchmarks/first_run_bias.py; docs/benchmarks.md), and the first trial is
    the baseline every speed-up is read against. It doubles as the check that the baseline's
    config runs at all. Returns the seconds it took. ``train_fn``: what trials train with (``trainer``).
    """
    from effsearch.trainer.data.splits import load_splits

    t = time.perf_counter()
    splits = load_splits(cfg, data_root)  # raises DataMissing (a ConfigError) first
    # A language model's training examples are the windows of its stream (it has no labels).
    n_train = len(splits.train_y) if splits.held_out is None else len(splits.train_x) // cfg.dataset.max_length
    epochs = min(float(cfg.epochs), WARM_UP_BATCHES * cfg.batch_size / max(1, n_train))
    try:
        short = cfg.replace(epochs=epochs, eval_every=epochs)
    except ConfigError:  # a rule tied to the budget (a CORDS strategy that would never select): no selection
        short = cfg.replace(
            **{"epochs": epochs, "eval_every": epochs, "selection.strategy": "full", "selection.fraction": 1.0}
        )
    trainer(train_fn)(short, data_root=data_root, progress=False)
    return time.perf_counter() - t


def requeue_interrupted(study: optuna.Study) -> None:
    """Trials this process lost to Ctrl-C (or SIGTERM) go back to the queue, so a rerun resumes them."""
    me = worker_id()
    trials = study.get_trials(deepcopy=False)
    queued = {t.user_attrs.get(RETRY_OF_KEY) for t in trials}
    for t in trials:
        if t.user_attrs.get(WORKER_KEY) != me or t.number in queued:
            continue
        if t.state == TrialState.RUNNING:  # stopped by a signal Optuna did not see
            try:
                mark_failed(study, t, "interrupted", INTERRUPTED_REASON)
            except optuna.exceptions.UpdateFinishedTrialError:  # it finished (or was failed elsewhere) meanwhile
                continue
        elif t.state != TrialState.FAIL or t.user_attrs.get(STATUS_KEY) in COUNTED_FAIL:
            continue  # finished, or a real failure: nothing to resume
        requeue(study, t, "interrupted")


class StopSignals:
    """While a worker runs its trials, Ctrl-C raises KeyboardInterrupt and SIGTERM SystemExit (each
    stops the trial where it is, and ``work`` queues it again), unless SIGINT is ignored (a command
    started in the background). Composer's import installs the same SIGTERM handler and turns SIGINT
    into ``sys.exit``, which training puts back; a worker no longer imports Composer for this (6 s),
    and SIGTERM before training's import had killed it with its trial RUNNING.

    Each signal is also remembered: Python drops an exception raised in a garbage collector's
    callback ("Exception ignored in ..."), and a worker whose one signal landed there (the
    parent-death SIGTERM of a killed main process has no second) had run the rest of the study.
    ``again`` raises it before the next trial is asked for."""

    def __init__(self) -> None:
        self.got: list[int] = []

    def handler(self, signum: int, frame: Any) -> None:
        self.got.append(signum)
        if signum == signal.SIGINT:
            signal.default_int_handler(signum, frame)
        sys.exit(128 + signum)

    def installed(self) -> contextlib.AbstractContextManager[None]:
        ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        return handled_by(self.handler, (signal.SIGTERM,) if ignored else (signal.SIGINT, signal.SIGTERM))

    def again(self) -> None:
        """Raise the first signal received, if any (its exception may have been dropped)."""
        if self.got:
            self.handler(self.got[0], None)


def work(
    spec: StudySpec,
    index: int = 0,
    data_root: str | Path | None = None,
    progress: Progress | None = None,
    since: float | None = None,
    warm: bool = True,
    train_fn: TrainFn | None = None,
    devices: str | None = None,
) -> str:
    """One worker: run trials until the study has n_trials, the timeout passes, the budget is
    spent, the same error repeats (``failure_limit``) or Ctrl-C. Returns "done", "failed" or "interrupted".

    ``progress``: shows each finished trial (the main process's worker); ``since``: when the
    command started (the failure limit counts this run's trials only); ``train_fn``: what its trials
    train with (default: ``objective.trainer``'s).
    ``devices``: this worker's CUDA_VISIBLE_DEVICES, recorded on its trials (None: the first worker's).
    """
    quiet_and_share_cores(spec)
    started = time.time()
    storage = open_storage(spec)
    study = optuna.load_study(study_name=spec.name, storage=storage, sampler=make_sampler(spec.sampler, spec.seed))
    stop, budget = StopAtTotal(spec.n_trials), StopAtBudget(spec, storage)
    if budget.reached(study) or (stop.reached(study) and not wait_for_others(spec, study, stop, started)):
        return "done"
    signals = StopSignals()
    with signals.installed():
        train_fn = trainer(train_fn)
        if warm:
            warm_up_or_warn(spec, index, data_root, train_fn)
        failures = StopOnRepeatedFailure(spec.failure_limit, datetime.datetime.fromtimestamp(since or started))
        beat = None if spec.is_rdb else JournalHeartbeat(storage, spec.heartbeat.interval)
        objective = Objective(
            spec, study, artifact_store(spec), data_root, beat, lambda: reap_dead(spec, study), train_fn
        )
        devices = devices if devices is not None else devices_of(spec)[0]
        objective.place(devices, shares_devices(spec), worker_kind(spec, devices))
        kinds.draw_baselines_first(study, objective.kind)
        signed_asks(study, signals.again)
        callbacks: list[Callable[[optuna.Study, FrozenTrial], Any]] = [
            objective.told,
            stop,
            budget,
            failures,
            lambda study, trial: mark_lost(spec, study),
            lambda study, trial: study.stop() if objective.uncounted else None,
        ]
        if progress is not None:
            callbacks.append(progress)
        try:
            return run_trials(spec, study, objective, callbacks, Stops(stop, budget, failures), started)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C; SIGTERM (StopSignals)
            with signals_held():
                requeue_interrupted(study)
            return "interrupted"
        except Exception as e:
            return stopped_unwritable(spec, e)
        finally:
            if beat is not None:
                beat.beat(None)


def quiet_and_share_cores(spec: StudySpec) -> None:
    """This worker's settings: no warnings of Optuna's experimental features, and its share of the cores."""
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if spec.workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // spec.workers))


class Stops(NamedTuple):
    """What ends a worker's trials (each also an Optuna callback)."""

    total: StopAtTotal
    budget: StopAtBudget
    failures: StopOnRepeatedFailure


def run_trials(
    spec: StudySpec,
    study: optuna.Study,
    objective: Objective,
    callbacks: list[Callable[[optuna.Study, FrozenTrial], Any]],
    stops: Stops,
    started: float,
) -> str:
    """``study.optimize`` until one of ``stops`` or the timeout ends the worker: "done" or "failed"."""
    stop, budget, failures = stops
    while True:
        left = None if spec.timeout is None else spec.timeout - (time.time() - started)
        if left is not None and left <= 0:
            break
        optimize(spec, study, objective, callbacks, left)
        if failures.hit:
            return "failed"
        if objective.uncounted:
            log.error("effsearch run: stopped: %s; the compute budget would not see it", objective.uncounted)
            return "failed"
        if budget.reached(study):
            break
        # Not reached now though the callback stopped: a trial running elsewhere was failed
        # by heartbeat in between (it counted as running then) and is queued again: run on.
        # The timeout is checked at the top.
        if stop.reached(study) and not wait_for_others(spec, study, stop, started):
            break  # the study has its n_trials
    return "done"


def optimize(
    spec: StudySpec,
    study: optuna.Study,
    objective: Objective,
    callbacks: list[Callable[[optuna.Study, FrozenTrial], Any]],
    left: float | None,
) -> None:
    """One ``study.optimize`` call, until a callback stops it or ``left`` seconds pass."""
    try:
        study.optimize(
            objective,
            n_trials=None,
            timeout=left,
            catch=(TrialFailed,),
            callbacks=callbacks,
            # A full gc costs ~0.5 s a trial; it matters only for freeing GPU memory.
            gc_after_trial=spec.space.machine.device == "cuda",
        )
    except Exception as e:
        # This worker was stopped or hung mid-trial and the others took its trial over:
        # Optuna cannot record its end. Dropped (said once); run_trials's checks run as after
        # any trial, as the callbacks did not.
        if not objective.lost_at_tell(e):
            raise
        if isinstance(objective.raised, (KeyboardInterrupt, SystemExit)):
            raise objective.raised from None  # Ctrl-C during that trial: stop, as work does


def warm_up_or_warn(spec: StudySpec, index: int, data_root: str | Path | None, train_fn: TrainFn) -> None:
    """A worker's warm-up; one that fails is a warning with its cause (the main process's
    pre-flight trained the baseline's config already, so the study goes on, but this worker's
    first timed trial then pays the process's first-run costs)."""
    try:
        warm_up(phases.trial_config(spec, spec.baseline), data_root, train_fn)
    except Exception as e:  # noqa: BLE001 - logged with its cause; the trials that follow record their own
        log.warning(
            "worker %d: the warm-up run of the baseline's config failed (%s: %s); its first trial's time "
            "includes this process's first-run costs",
            index,
            type(e).__name__,
            e,
        )


def reap_dead(spec: StudySpec, study: optuna.Study) -> list[int]:
    """Fail (and queue again) the trials of workers that are gone."""
    hb = spec.heartbeat
    if not spec.is_rdb:
        return requeue_dead_local(study, hb.max_retry, hb.grace_period)
    # Optuna's heartbeats: fail_stale_trials fails them, RetryHeartbeatStaleTrialCallback queues the retry.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optuna.storages.fail_stale_trials(study)
    return mark_lost(spec, study)


def mark_lost(spec: StudySpec, study: optuna.Study) -> list[int]:
    """A note on each trial Optuna failed by heartbeat (at any worker's next trial): FAIL with
    nothing recorded, its worker having died mid-trial. (A finished trial's attributes cannot
    change; its note lives on the study.)"""
    if not spec.is_rdb:
        return []
    trials = study.get_trials(deepcopy=False)
    lost = [t for t in trials if t.state == TrialState.FAIL and STATUS_KEY not in t.user_attrs]
    if not lost:
        return []
    for t in lost:
        if has_note(study, t):
            continue
        w = t.user_attrs.get(WORKER_KEY) or {}
        retry = [x.number for x in trials if t.number in x.system_attrs.get(RETRY_HISTORY_KEY, ())]
        reason = (
            f"its worker ({w.get('host')} pid {w.get('pid')}) stopped sending heartbeats for "
            f"{spec.heartbeat.grace_period} s" + (f"; queued again as trial {retry[0]}" if retry else "")
        )
        try:
            save_note_by_id(study, t, f"### Trial {t.number}: lost\n\n{reason}")
        except storage_errors() as e:  # the note is all a heartbeat-failed trial has: say it is missing
            log.warning("cannot write the note of trial %d (lost: %s): %s", t.number, reason, why(e))
    return [t.number for t in lost]


def wait_for_others(spec: StudySpec, study: optuna.Study, stop: StopAtTotal, started: float) -> bool:
    """The study has n_trials counting the ones running elsewhere: wait until they end. True when
    one of them died (its worker's heartbeat stopped or its process is gone) and was queued again,
    so this worker should go on and run it; False when the study is complete (or time is up)."""
    poll = min(2.0, spec.heartbeat.interval)
    while True:
        reap_dead(spec, study)
        c = queries.counts(study.get_trials(deepcopy=False))
        if stop.n is None or c["done"] >= stop.n:
            return False
        if c["done"] + c["running"] < stop.n:
            return True
        if spec.timeout is not None and time.time() - started >= spec.timeout:
            return False
        time.sleep(poll)


WORKER_EXIT = {"done": 0, "failed": 1, "interrupted": 130}


class WorkerSetup(NamedTuple):
    """What a worker process takes from the main one besides its study: where its log records go
    (the main process hands them to its own handlers, whatever they are), from which level, and
    Optuna's verbosity there (a spawned process starts with Python's defaults)."""

    logs: Any  # a multiprocessing queue
    level: int
    optuna_verbosity: int
    train_fn: TrainFn | None = None  # a function given to the run (pickled by name: a module's own)


def _worker_main(
    raw: dict,
    path: str,
    source: str,
    overrides: dict,
    index: int,
    data_root: str | Path | None,
    since: float,
    setup: WorkerSetup,
    devices: str | None = None,
) -> None:
    stopped_with_parent()
    if devices is not None:  # before anything asks CUDA: it reads the variable once, at its start
        os.environ["CUDA_VISIBLE_DEVICES"] = devices
    from effsearch.config.imports import import_plugins
    from effsearch.search.study.studyfile import from_mapping

    logger = logging.getLogger("effsearch")
    logger.addHandler(QueueHandler(setup.logs))
    logger.setLevel(setup.level)
    optuna.logging.set_verbosity(setup.optuna_verbosity)  # this process's own: as the main process has it
    try:
        import_plugins()  # the parent's plugins (EFFSEARCH_PLUGINS); the study's own come with from_mapping
        phase, picks = overrides.pop("phase"), overrides.pop("picks")
        # The study as the parent read it (a study given as a mapping has no file to read again), on
        # the parent's machine: this worker sees only its own GPUs, the study counts them all.
        spec = phases.phase_spec(from_mapping(raw, path, source=source, **overrides), phase, picks)
        sys.exit(WORKER_EXIT[work(spec, index, data_root, since=since, train_fn=setup.train_fn, devices=devices)])
    except KeyboardInterrupt:
        sys.exit(130)


def stopped_unwritable(spec: StudySpec, e: Exception) -> str:
    """ "failed", said in one line, when ``e`` is a storage that stopped taking writes (a full disk);
    else ``e`` raised again. Optuna's own handling of the failed write fails again ("Should not
    reach"): three chained tracebacks for one cause a user can act on."""
    full = unwritable(e)
    if full is None:
        raise e
    log.error(
        "effsearch run: stopped: the study's storage %s cannot be written (%s); its finished trials are "
        "kept: free some space (or fix the storage) and run the same command again to resume",
        spec.storage_label(),
        full.strerror or full,
    )
    return "failed"


def unwritable(e: BaseException) -> OSError | None:
    """The OSError of a storage that cannot take writes (a full disk or quota, a read-only or
    failing file system) among ``e`` and the exceptions it was raised from or during; None: none."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in UNWRITABLE:
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


UNWRITABLE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO}


def stopped_with_parent() -> None:
    """On Linux, a worker gets SIGTERM when the main process dies without telling it (SIGKILL, the
    OOM killer): stopped as that process's own SIGTERM would stop it, its trial queued again. Left
    alone, the workers ran the rest of the study unseen, and timed a new run's trials against their own."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # a libc without prctl: the main process's own stop still reaches it
        return
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # it died before the prctl
        os.kill(os.getpid(), signal.SIGTERM)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def devices_of(spec: StudySpec) -> list[str | None]:
    """Each worker's CUDA_VISIBLE_DEVICES (None on a machine without GPUs: nothing to pin)."""
    gpus = spec.space.machine.gpus
    if not gpus:
        return [None] * spec.workers
    return list(worker_devices(gpus, spec.workers, spec.devices_per_trial))


def worker_kind(spec: StudySpec, devices: str | None) -> str | None:
    """The kind of device this worker trains the baseline on (None: it cannot, and its trials say why)."""
    try:
        device = check_runnable(phases.trial_config(spec, spec.baseline))
    except ConfigError:
        return None
    return str(device_record(device, devices, False)["name"])


def shares_devices(spec: StudySpec) -> bool:
    """Do this study's workers train on GPUs another worker uses too (``share_devices``)?"""
    gpus = spec.space.machine.gpus
    return bool(gpus) and spec.workers > free_workers(gpus, spec.devices_per_trial)


class _Relay(logging.Handler):
    """A worker's log record, handled in the main process as if logged there."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)


def start_workers(spec: StudySpec, data_root: str | Path | None, since: float, setup: WorkerSetup) -> list:
    """``spec.workers`` worker processes on the study, started."""
    ctx = multiprocessing.get_context("spawn")  # fork after torch/CUDA is unsafe
    overrides = {
        "storage": spec.storage,
        "n_trials": spec.n_trials,
        "timeout": spec.timeout,
        "budget": spec.budget,
        "workers": spec.workers,
        "machine": spec.space.machine,
        "phase": spec.phase,
        "picks": phases.picks_of(spec),
    }
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(spec.raw, str(spec.path), spec.source, overrides, i, data_root, since, setup, devices),
            name=f"effsearch-worker-{i}",
        )
        for i, devices in enumerate(devices_of(spec))
    ]
    for p in procs:
        p.start()
    return procs


def run_workers(
    spec: StudySpec,
    study: optuna.Study,
    data_root: str | Path | None,
    progress: Progress,
    t0: float | None = None,
    train_fn: TrainFn | None = None,
) -> str:
    """Run the study in ``spec.workers`` processes, ``progress`` showing their trials as they
    finish; returns "done", "failed" or "interrupted". ``train_fn``: what their trials train with
    (a module-level function: a worker imports it by name; default: ``objective.trainer``'s)."""
    logs = multiprocessing.get_context("spawn").Queue()
    listener = QueueListener(logs, _Relay())
    listener.start()
    level = logging.getLogger("effsearch").getEffectiveLevel()
    try:
        setup = WorkerSetup(logs, level, optuna.logging.get_verbosity(), train_fn)
        # The pre-flight's warm-up trained here, on the first GPU, which worker 0 trains on: its
        # cached blocks would shrink that worker's memory (and only that worker's) all study long.
        free_memory()
        procs = start_workers(spec, data_root, t0 or time.time(), setup)
        return watch(procs, study, progress)
    finally:
        listener.stop()  # after the workers: their last records are handled first


def signed_asks(study: optuna.Study, first: Callable[[], None] = lambda: None) -> None:
    """Make ``study`` (this worker's instance) write who runs a trial as it asks for it, with
    Ctrl-C and SIGTERM put off until that is written. A trial is RUNNING from the moment Optuna
    creates it; one a signal stopped before its worker was named is one ``requeue_interrupted``
    cannot tell from another worker's, and it stayed RUNNING until a later run's reaper failed it.
    ``first`` runs before each ask (``StopSignals.again``)."""
    ask = study.ask

    def signed(*args: Any, **kwargs: Any) -> optuna.Trial:
        first()
        with signals_put_off():
            trial = ask(*args, **kwargs)
            trial.set_user_attr(WORKER_KEY, worker_id())
        return trial

    study.ask = signed  # type: ignore[method-assign]


def signals_held() -> contextlib.AbstractContextManager[None]:
    """SIGINT and SIGTERM ignored while the block runs, in a process that is stopping already: a
    second signal (the main process tells a worker to stop when a Ctrl-C may have reached it
    already: ``watch``) must not cut short the queueing of its trials."""
    return handled_by(signal.SIG_IGN)


def sigterm_as_exit() -> contextlib.AbstractContextManager[None]:
    """SIGTERM raises SystemExit here, as Composer's handler does once imported: without it the main
    process died at once and its workers, never told, ran the whole study on."""
    return handled_by(lambda signum, frame: sys.exit(128 + signum), (signal.SIGTERM,))


def stop_workers(procs: list, told: bool) -> None:
    """Wait for the workers to queue their trials and exit. Ctrl-C at a terminal reaches the whole
    process group; SIGTERM, or SIGINT sent to this process alone (`kill -INT`, a notebook's
    interrupt), reaches only it (``told``: False): a worker still training a moment later was never
    told, and would run the whole study. Told then."""
    if not told:
        deadline = time.time() + TOLD_WITHIN
        for p in procs:
            p.join(timeout=max(0.0, deadline - time.time()))
    for p in procs:
        if p.is_alive():
            p.terminate()  # SIGTERM: the worker queues its trial again and exits 130 (work)
    for p in procs:
        p.join(timeout=120)
        if p.is_alive():
            p.terminate()


def hurried_by_signals(procs: list, progress: Progress) -> contextlib.AbstractContextManager[None]:
    """Another Ctrl-C or SIGTERM while the workers stop tells them at once (SIGTERM: each queues its
    trial again) instead of cutting the wait short: the main process would have left with no word
    on resuming, and the interpreter's exit, which joins the workers too, with a traceback."""

    def hurry(signum: int, frame: object) -> None:
        alive = [p for p in procs if p.is_alive()]
        if alive:
            progress.report.line("stopping now: telling the workers to queue their trials and exit", flush=True)
        for p in alive:
            p.terminate()

    return handled_by(hurry)


# Seconds a worker has to stop by itself after a Ctrl-C before the main process tells it (``watch``).
TOLD_WITHIN = 5.0


def watch(procs: list, study: optuna.Study, progress: Progress) -> str:
    """Poll the workers until they end; on Ctrl-C or SIGTERM wait for them to record their trials."""
    try:
        with sigterm_as_exit():
            while any([p.is_alive() for p in procs]):  # a list: every child is polled (and a dead one reaped)
                time.sleep(2.0)
                progress.poll(study)
    except (KeyboardInterrupt, SystemExit) as e:
        progress.report.line("\nstopping: waiting for the workers to record their trials...", flush=True)
        with hurried_by_signals(procs, progress):
            stop_workers(procs, told=not isinstance(e, KeyboardInterrupt))
        progress.poll(study)
        return "interrupted"
    progress.poll(study)
    bad = [p.exitcode for p in procs if p.exitcode not in (0, 1, 130)]
    if bad:  # killed; the survivors re-ran its trial (wait_for_others)
        log.warning("%d worker(s) exited with codes %s", len(bad), bad)
    if any(p.exitcode == 130 for p in procs):
        return "interrupted"
    return "failed" if any(p.exitcode == 1 for p in procs) else "done"
