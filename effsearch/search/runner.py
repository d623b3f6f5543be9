"""`effsearch run`: the study loop.

Trials run in-process (starting Python with Composer costs ~25 s, a quickstart
trial a few seconds), one after another in each worker; ``--workers K`` starts K
worker processes on the same storage, and several machines are just several
`effsearch run` on one PostgreSQL URL (Optuna's own distributed mode). The
main process prints one line per finished trial and the Pareto front at the end.
"""

from __future__ import annotations

import datetime
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings

import optuna
from optuna.trial import TrialState

from effsearch import objectives as O
from effsearch.config import ConfigError, TrainConfig
from effsearch.search import phases, record, report
from effsearch.search.pruner import make_pruner
from effsearch.search.samplers import make_sampler
from effsearch.search.storage import (BASELINE_KEY, STATUS_KEY, WORKER_KEY, JournalHeartbeat, artifact_store,
                                      check_storage, has_note, mark_failed, open_storage, requeue, requeue_dead_local,
                                      retry_history, save_note_by_id, set_constraints, trial_id, worker_id)
from effsearch.trainer.result import speedup


class TrialFailed(Exception):
    """A trial that failed for a recorded reason; the study goes on."""


class Objective:
    def __init__(self, spec, study, store, data_root=None, heartbeat=None):
        self.spec, self.study, self.store, self.data_root = spec, study, store, data_root
        self.pruner = make_pruner(spec.pruner, study)
        self.heartbeat = heartbeat  # journal storages: JournalHeartbeat
        self._baseline_tta = None

    def __call__(self, trial: optuna.Trial):
        trial.set_user_attr(WORKER_KEY, worker_id())
        if self.heartbeat is not None:
            self.heartbeat.beat(trial_id(trial))
        try:
            return self._run(trial)
        except (KeyboardInterrupt, SystemExit):
            trial.set_user_attr(STATUS_KEY, "interrupted")
            _note(trial, "interrupted", "stopped by Ctrl-C or SIGTERM; it is queued again and a rerun "
                                        "of the same command resumes it")
            raise
        finally:
            if self.heartbeat is not None:
                self.heartbeat.beat(None)

    def _run(self, trial: optuna.Trial):
        from effsearch.trainer.run import check_runnable, train

        is_baseline = bool(trial.user_attrs.get(BASELINE_KEY))
        if is_baseline and self._other_baseline(trial):
            trial.set_user_attr(STATUS_KEY, "duplicate")
            trial.set_user_attr("reason", "a second baseline, queued by another worker starting at the same "
                                          "moment; not run")
            raise TrialFailed("duplicate baseline")
        try:
            sampled = self.spec.space.sample(trial)
            # The baseline trains exactly the study file's config; its parameters are recorded
            # as far as the space can express them.
            full = self.spec.baseline if is_baseline else \
                phases.confirm_config(trial) or TrainConfig.from_dict(sampled, source=f"trial {trial.number}")
            cfg = phases.trial_config(self.spec, full)  # phase 1 of a tuning phase trains on a subset
            check_runnable(cfg)
        except Exception as e:  # a space bug or a rule the space does not know: never trained
            self._fail(trial, "invalid", f"invalid config: {e}")
        config_yaml = cfg.to_yaml()
        trial.set_user_attr("config", config_yaml)
        if cfg != full:
            trial.set_user_attr("full_config", full.to_yaml())
        self.pruner.begin(trial, cfg, may_prune=not is_baseline)  # the baseline is the yardstick: never pruned
        try:
            result = train(cfg, data_root=self.data_root, progress=False,
                           on_eval=lambda point: self.pruner.on_eval(trial, point))
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # out of memory, a CORDS error, ...: recorded, the study goes on
            _free_memory()
            self._fail(trial, "failed", f"{type(e).__name__}: {e}")
        sp = 1.0 if is_baseline and result.reached_target else self._speedup(result)
        record.set_attrs(trial, record.result_attrs(result, sp))
        try:
            record.upload_files(trial, self.store, result, config_yaml)
            record.save_note(trial, record.note_text(trial.number, result, report.summary(cfg.to_dict()),
                                                     sp, is_baseline))
        except Exception as e:  # a full disk must not cost the trial
            trial.set_user_attr("artifact_error", f"{type(e).__name__}: {e}")
        if result.status == "completed":
            constraints = O.constraints(result, self.spec.objectives)
            if constraints:  # Optuna's format, which its samplers and optuna-dashboard read
                set_constraints(trial, constraints)
            return O.values(result, self.spec.objectives)
        if result.status == "pruned":
            raise optuna.TrialPruned(result.reason)
        self._fail(trial, "diverged" if result.status == "diverged" else "failed", result.reason or result.status)

    def _other_baseline(self, trial) -> bool:
        """Two workers that start on a new study together both queue the baseline: the lower number wins."""
        mine = set(retry_history(trial)) | {trial.number}
        for t in self.study.get_trials(deepcopy=False):
            if t.number >= trial.number or t.number in mine or not t.user_attrs.get(BASELINE_KEY):
                continue
            if t.state == TrialState.FAIL and t.user_attrs.get(STATUS_KEY) not in report.COUNTED_FAIL:
                continue  # lost, interrupted or itself a duplicate: its retry (if any) is the baseline
            return True
        return False

    def _fail(self, trial, status: str, reason: str):
        trial.set_user_attr(STATUS_KEY, status)
        trial.set_user_attr("reason", reason[:2000])
        if status != "diverged":  # a diverged trial has its full note (curve, config) already
            _note(trial, status, reason)
        raise TrialFailed(reason)

    def _speedup(self, result) -> float | None:
        if result.time_to_target is None:
            return None
        if self._baseline_tta is None:
            base = report.baseline_trial(self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
            self._baseline_tta = base.user_attrs.get("time_to_target") if base else None
        return speedup(self._baseline_tta, result.time_to_target)


def _note(trial, status: str, reason: str) -> None:
    """The dashboard note of a trial that did not finish: why, and its config when it has one."""
    cfg = report.config_of(trial)
    text = (f"### Trial {trial.number}: {status}\n\n{reason[:2000]}"
            + (f"\n\n- {report.summary(cfg)}" if cfg else ""))
    try:
        record.save_note(trial, text)
    except Exception:  # a note must never cost the study
        pass


def _free_memory() -> None:
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


WARM_UP_BATCHES = 8  # enough to import, allocate and pick kernels; ~1 s on a CPU for the quickstart


def warm_up(cfg: TrainConfig, data_root=None) -> float:
    """Train ``cfg`` for a few batches, untimed, so the process's first timed trial is not its slowest.

    The first run of a process pays lazy imports, allocator growth and kernel choice in its
    train seconds (benchmarks/first_run_bias.py; docs/benchmarks.md), and the first trial is
    the baseline every speed-up is read against. It doubles as the check that the baseline's
    config runs at all. Returns the seconds it took.
    """
    from effsearch.trainer import data as D
    from effsearch.trainer.run import train

    t = time.perf_counter()
    n_train = len(D.load_splits(cfg, data_root).train_y)  # raises DataMissing (a ConfigError) first
    epochs = min(float(cfg.epochs), WARM_UP_BATCHES * cfg.batch_size / max(1, n_train))
    try:
        short = cfg.replace(epochs=epochs, eval_every=epochs)
    except ConfigError:  # a rule tied to the budget (a CORDS strategy that would never select): no selection
        short = cfg.replace(**{"epochs": epochs, "eval_every": epochs, "selection.strategy": "full",
                               "selection.fraction": 1.0})
    train(short, data_root=data_root, progress=False)
    return time.perf_counter() - t


class BaselineBroken(Exception):
    """The baseline's config does not train (found before the first trial)."""


def preflight(spec, data_root, warm: bool = True) -> float | None:
    """Before the first trial: the storage opens (a ConfigError naming --storage otherwise), the
    data is there and the baseline's config trains a few batches (which also warms this process up)."""
    check_storage(spec)
    cfg = phases.trial_config(spec, spec.baseline)
    try:
        if warm:
            return warm_up(cfg, data_root)
        from effsearch.trainer import data as D

        D.load_splits(cfg, data_root)
        return None
    except ConfigError as e:  # the data is missing: it is the study's base config that names it
        raise ConfigError(f"base.{e.field}" if e.field else "base", e.message, spec.source) from None
    except KeyboardInterrupt:
        raise
    except Exception as e:
        raise BaselineBroken(f"{type(e).__name__}: {e}") from None


class StopAtTotal:
    """Stop this worker once the study's counted trials (plus those running elsewhere) reach n_trials."""

    def __init__(self, n_trials: int | None):
        self.n = n_trials

    def reached(self, study) -> bool:
        if self.n is None:
            return False
        # A dead worker's trial stays RUNNING until someone checks its heartbeat: check first,
        # so it is failed (and re-queued) instead of counted as running.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optuna.storages.fail_stale_trials(study)
        c = report.counts(study.get_trials(deepcopy=False))
        return c["done"] + c["running"] >= self.n

    def __call__(self, study, trial) -> None:
        if self.reached(study):
            study.stop()


# Statuses of trials that failed with an error (an exception, a config the trainer refused);
# a diverged trial is a result of the search (a too-high lr), not an error.
ERROR_STATUSES = ("failed", "invalid")


def repeated_failure(study, limit: int, since: datetime.datetime | None = None) -> tuple[str, list[int]] | None:
    """(the error, the trial numbers) when the last ``limit`` finished trials started since
    ``since`` all failed with the same error (class and message); else None."""
    if not limit:
        return None
    done = [t for t in study.get_trials(deepcopy=False) if report.counted(t)
            and (since is None or (t.datetime_start and t.datetime_start >= since))]
    last = sorted(done, key=lambda t: (t.datetime_complete or t.datetime_start, t.number))[-limit:]
    if len(last) < limit or any(t.user_attrs.get(STATUS_KEY) not in ERROR_STATUSES for t in last):
        return None
    reasons = {t.user_attrs.get("reason") for t in last}
    return (reasons.pop(), sorted(t.number for t in last)) if len(reasons) == 1 else None


class StopOnRepeatedFailure:
    """Stop this worker when the study's last few trials failed with the same error: a missing
    dataset, a broken install or a bad base config fails every trial alike."""

    def __init__(self, limit: int, since: datetime.datetime):
        self.limit, self.since, self.hit = limit, since, None

    def __call__(self, study, trial) -> None:
        self.hit = repeated_failure(study, self.limit, self.since)
        if self.hit:
            study.stop()


class Progress:
    """One line per finished trial, with the study's standing."""

    def __init__(self, spec, study, out=None, t0: float | None = None):
        self.spec, self.out = spec, out or sys.stderr
        self.t0 = t0 if t0 is not None else time.time()
        self.seen = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
        self.errors: dict[str, int] = {}  # error text -> the first trial that printed it

    def __call__(self, study, trial=None) -> None:
        self.poll(study)

    def poll(self, study) -> None:
        trials = study.get_trials(deepcopy=False)
        for t in sorted((t for t in trials if t.state.is_finished() and t.number not in self.seen),
                        key=lambda t: t.number):
            self.seen.add(t.number)
            reason = t.user_attrs.get("reason") if t.state == TrialState.FAIL else None
            same = self.errors.get(reason) if reason else None
            if reason and same is None:
                self.errors[reason] = t.number
            print(report.trial_line(t, self.spec.objectives, trials, study, self.spec.n_trials,
                                    time.time() - self.t0, same_as=same), file=self.out, flush=True)


def metric_names(objectives) -> list[str]:
    """What optuna-dashboard labels each objective with (the study's user attr keeps the names)."""
    from effsearch.search.plots import LABELS

    return [LABELS.get(n, n) for n in objectives]


def ensure_study(spec, storage) -> optuna.Study:
    """Create the study (or check the stored one matches) and queue the baseline once."""
    if spec.name in optuna.get_all_study_names(storage):
        study = optuna.load_study(study_name=spec.name, storage=storage)
        stored = study.user_attrs.get("objectives")
        if (stored and list(stored) != list(spec.objectives)) or \
                [d.name.lower() for d in study.directions] != spec.directions:
            raise ConfigError("objectives", f"study {spec.name!r} in {spec.storage_label()} was created with "
                                            f"objectives {stored or [d.name.lower() for d in study.directions]}; "
                                            f"the file names {list(spec.objectives)}. Use a new study name to "
                                            "change objectives", spec.source)
    else:
        study = optuna.create_study(study_name=spec.name, storage=storage, directions=spec.directions,
                                    load_if_exists=True)
        study.set_user_attr("objectives", list(spec.objectives))
        study.set_user_attr("target_accuracy", phases.trial_config(spec, spec.base).target_accuracy)
        from effsearch.search.studyfile import dump

        study.set_user_attr("study_file", dump(spec))
    if study.metric_names is None:  # the dashboard's axes read these instead of "Objective 0"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study.set_metric_names(metric_names(spec.objectives))
    if not any(t.user_attrs.get(BASELINE_KEY) for t in study.get_trials(deepcopy=False)):
        study.enqueue_trial(spec.space.encode(spec.baseline), user_attrs={BASELINE_KEY: True})
    return study


def requeue_interrupted(study) -> None:
    """Trials this process lost to Ctrl-C (or SIGTERM) go back to the queue, so a rerun resumes them."""
    me = worker_id()
    trials = study.get_trials(deepcopy=False)
    queued = {t.user_attrs.get("retry_of") for t in trials}
    for t in trials:
        if t.user_attrs.get(WORKER_KEY) != me or t.number in queued:
            continue
        if t.state == TrialState.RUNNING:  # stopped by a signal Optuna did not see
            try:
                mark_failed(study, t, "interrupted")
            except Exception:
                continue
        elif t.state != TrialState.FAIL or t.user_attrs.get(STATUS_KEY) in report.COUNTED_FAIL:
            continue  # finished, or a real failure: nothing to resume
        requeue(study, t, "interrupted")


def keyboard_interrupt_on_sigint() -> None:
    """Importing Composer turns SIGINT into ``sys.exit(130)``, which Optuna does not treat as
    an interruption (the trial would stay RUNNING): give Ctrl-C its KeyboardInterrupt back."""
    import composer.core.engine  # noqa: F401  (installs its handler at import)

    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, signal.default_int_handler):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def work(spec, index: int = 0, data_root=None, progress: bool = False, out=None, t0=None,
         since: float | None = None, warm: bool = True) -> str:
    """One worker: run trials until the study has n_trials, the timeout passes, the same error
    repeats (``failure_limit``) or Ctrl-C. Returns "done", "failed" or "interrupted".

    ``since``: when the command started (the failure limit counts this run's trials only).
    """
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if spec.workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // spec.workers))
    started = time.time()
    storage = open_storage(spec)
    study = optuna.load_study(study_name=spec.name, storage=storage, sampler=make_sampler(spec.sampler, spec.seed))
    stop = StopAtTotal(spec.n_trials)
    if stop.reached(study) and not wait_for_others(spec, study, stop, started):
        return "done"
    keyboard_interrupt_on_sigint()
    if warm:
        try:
            warm_up(phases.trial_config(spec, spec.baseline), data_root)
        except Exception:  # the main process checked the baseline already; never cost the study for this
            pass
    failures = StopOnRepeatedFailure(spec.failure_limit, datetime.datetime.fromtimestamp(since or started))
    callbacks = [stop, failures, lambda study, trial: mark_lost(spec, study)] + \
        ([Progress(spec, study, out, t0)] if progress else [])
    beat = None if spec.is_rdb else JournalHeartbeat(storage, spec.heartbeat["interval"])
    objective = Objective(spec, study, artifact_store(spec), data_root, heartbeat=beat)
    try:
        while True:
            left = None if spec.timeout is None else spec.timeout - (time.time() - started)
            if left is not None and left <= 0:
                break
            study.optimize(objective, n_trials=None, timeout=left, catch=(TrialFailed,), callbacks=callbacks,
                           # A full gc costs ~0.5 s a trial; it matters only for freeing GPU memory.
                           gc_after_trial=spec.space.machine.device == "cuda")
            if failures.hit:
                return "failed"
            if not stop.reached(study) or not wait_for_others(spec, study, stop, started):
                break  # the timeout, or the study has its n_trials
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C; SIGTERM arrives as Composer's sys.exit
        requeue_interrupted(study)
        return "interrupted"
    finally:
        if beat is not None:
            beat.beat(None)
    return "done"


def reap_dead(spec, study) -> list[int]:
    """Fail (and queue again) the trials of workers that are gone."""
    hb = spec.heartbeat
    if not spec.is_rdb:
        return requeue_dead_local(study, hb["max_retry"], hb["grace_period"])
    # Optuna's heartbeats: fail_stale_trials fails them, RetryHeartbeatStaleTrialCallback queues the retry.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optuna.storages.fail_stale_trials(study)
    return mark_lost(spec, study)


def mark_lost(spec, study) -> list[int]:
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
        retry = [x.number for x in trials if t.number in x.system_attrs.get("retry_history", ())]
        reason = (f"its worker ({w.get('host')} pid {w.get('pid')}) stopped sending heartbeats for "
                  f"{spec.heartbeat['grace_period']} s" + (f"; queued again as trial {retry[0]}" if retry else ""))
        try:
            save_note_by_id(study, t, f"### Trial {t.number}: lost\n\n{reason}")
        except Exception:  # the note is a courtesy
            pass
    return [t.number for t in lost]


def wait_for_others(spec, study, stop: StopAtTotal, started: float) -> bool:
    """The study has n_trials counting the ones running elsewhere: wait until they end. True when
    one of them died (its worker's heartbeat stopped or its process is gone) and was queued again,
    so this worker should go on and run it; False when the study is complete (or time is up)."""
    poll = min(2.0, spec.heartbeat["interval"])
    while True:
        reap_dead(spec, study)
        c = report.counts(study.get_trials(deepcopy=False))
        if stop.n is None or c["done"] >= stop.n:
            return False
        if c["done"] + c["running"] < stop.n:
            return True
        if spec.timeout is not None and time.time() - started >= spec.timeout:
            return False
        time.sleep(poll)


WORKER_EXIT = {"done": 0, "failed": 1, "interrupted": 130}


def _worker_main(path: str, overrides: dict, index: int, data_root, since: float) -> None:
    from effsearch.search.studyfile import load

    try:
        phase = overrides.pop("phase")
        spec = phases.phase_spec(load(path, **overrides), phase)
        sys.exit(WORKER_EXIT[work(spec, index, data_root, since=since)])
    except KeyboardInterrupt:
        sys.exit(130)


def run_workers(spec, study, data_root, out, t0=None) -> str:
    ctx = multiprocessing.get_context("spawn")  # fork after torch/CUDA is unsafe
    overrides = {"storage": spec.storage, "n_trials": spec.n_trials, "timeout": spec.timeout,
                 "workers": spec.workers, "phase": spec.phase}
    since = t0 or time.time()
    procs = [ctx.Process(target=_worker_main, args=(str(spec.path), overrides, i, data_root, since),
                         name=f"effsearch-worker-{i}") for i in range(spec.workers)]
    for p in procs:
        p.start()
    progress = Progress(spec, study, out, t0)
    try:
        while any([p.is_alive() for p in procs]):  # a list: every child is polled (and a dead one reaped)
            time.sleep(2.0)
            progress.poll(study)
    except KeyboardInterrupt:
        print("\nstopping: waiting for the workers to record their trials...", file=out, flush=True)
        for p in procs:
            p.join(timeout=120)
            if p.is_alive():
                p.terminate()
        progress.poll(study)
        return "interrupted"
    progress.poll(study)
    bad = [p.exitcode for p in procs if p.exitcode not in (0, 1, 130)]
    if bad:  # killed; the survivors re-ran its trial (wait_for_others)
        print(f"warning: {len(bad)} worker(s) exited with codes {bad}", file=out)
    if any(p.exitcode == 130 for p in procs):
        return "interrupted"
    return "failed" if any(p.exitcode == 1 for p in procs) else "done"


def header(spec, study) -> str:
    c = report.counts(study.get_trials(deepcopy=False))
    objs = ", ".join(f"{n} ({d})" for n, d in zip(spec.objectives, spec.directions))
    budget = f"{spec.n_trials} trials ({c['done']} done)" if spec.n_trials else f"{c['done']} trials done"
    timeout = f", at most {spec.timeout:g} s" if spec.timeout else ""
    pr = spec.pruner
    pruner = ", ".join(f"{k} {v:g}" for k, v in pr.items() if k != "name")
    phase = {"tune": "phase 1 of 2 (tune): ", "confirm": "phase 2 of 2 (confirm): "}.get(spec.phase, "")
    return "\n".join([
        f"effsearch run: {phase}study {spec.name!r} from {spec.source}",
        f"  storage    {spec.storage_label()}",
        f"  artifacts  {spec.artifacts}",
        f"  objectives {objs}; target val accuracy {phases.trial_config(spec, spec.base).target_accuracy:g}",
        f"  space      {len(spec.space.active)} dimensions searched on {spec.space.machine.describe()} "
        f"(effsearch space show {spec.source})",
        f"  sampler    {spec.sampler['name']}, seed {spec.seed}; {spec.workers} worker(s); {budget}{timeout}"
        if spec.phase != "confirm" else
        f"  trials     the baseline and phase 1's top {spec.tuning['top_k']} x {spec.tuning['seeds']} seed(s), "
        f"queued; {spec.workers} worker(s); {budget}",
        f"  pruner     {pr['name']}" + (f" ({pruner})" if pruner else ""),
    ] + ([f"  tuning     {phases.summary(spec)}"] if spec.phase == "tune" else []))


def dashboard_hint(spec) -> str:
    from effsearch.search.storage import rdb_url
    from effsearch.search.studyfile import redact

    storage = redact(rdb_url(spec.storage)) if spec.is_rdb else spec.storage
    return f"optuna-dashboard {storage} --artifact-dir {spec.artifacts}"


def run(spec, data_root=None, out=None, t0: float | None = None) -> int:
    """Run (or resume) a study, with its tuning phase if it has one; returns the exit code:
    0 done, 1 the study (or a phase) could not do its work, 130 after Ctrl-C. Bad input (a
    storage that cannot be opened, missing data) raises ConfigError (exit code 2).
    ``t0``: when the command started."""
    out = out or sys.stderr
    t0 = t0 or time.time()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:  # before any trial: the storage opens, the data is there, the baseline's config trains
        warm = preflight(phases.tune_spec(spec) if phases.enabled(spec) else spec, data_root)
    except BaselineBroken as e:
        print(f"effsearch run: the baseline's config ({spec.source}: base, baseline) does not train: {e}\n"
              "  (found by a few batches of it before the first trial; nothing was run)", file=out)
        return 1
    if not phases.enabled(spec):
        return run_phase(spec, data_root, out, t0, warm=warm)
    tune = phases.tune_spec(spec)
    code = run_phase(tune, data_root, out, t0, warm=warm)
    if code:
        if code == 1:
            print("phase 2 (confirm) not started: phase 1 did not finish its work", file=out)
        return code
    storage = open_storage(spec)
    confirm = phases.confirm_spec(spec)
    study = ensure_study(confirm, storage)
    picked = phases.queue_confirm(spec, optuna.load_study(study_name=tune.name, storage=storage), study)
    print(f"\nconfirming phase 1's top {len(picked)} on the full data: trials {picked} of {tune.name!r}\n",
          file=out)
    code = run_phase(confirm, data_root, out, t0, study)
    text = phases.describe(study, spec.objectives)
    if text:
        print("\n" + text, file=out)
    return code


def run_phase(spec, data_root, out, t0, study=None, warm: float | None = None) -> int:
    """Run (or resume) one study to its n_trials. ``warm``: seconds the pre-flight warm-up took."""
    storage = open_storage(spec)
    study = study or ensure_study(spec, storage)
    lost = [] if spec.is_rdb else requeue_dead_local(study, spec.heartbeat["max_retry"])
    print(header(spec, study), file=out)
    if warm is not None:
        print(f"  warm-up    the baseline's config ran {WARM_UP_BATCHES} batches untimed ({warm:.1f} s), so the "
              "first timed trial is not this process's first run", file=out, flush=True)
    if lost:
        print(f"  re-queued trials {lost}: their worker process is gone", file=out)
    if StopAtTotal(spec.n_trials).reached(study):
        print(f"the study already has {spec.n_trials} trials; raise --n-trials to run more", file=out)
        outcome = "done"
    elif spec.workers == 1:
        outcome = work(spec, 0, data_root, progress=True, out=out, t0=t0, since=t0, warm=False)
    else:
        outcome = run_workers(spec, study, data_root, out, t0)
    print("", file=out)
    print(report.status_table(study, spec.objectives, show_all=False), file=out)
    trials = study.get_trials(deepcopy=False)
    warning = report.baseline_warning(trials)
    if warning:
        print(f"\nwarning: {warning}", file=out)
    print(f"\ndashboard: {dashboard_hint(spec)}", file=out)
    if outcome == "interrupted":
        print("interrupted: finished trials are kept; run the same command again to resume", file=out)
        return 130
    hit = repeated_failure(study, spec.failure_limit, datetime.datetime.fromtimestamp(t0))
    if outcome == "failed" or hit:
        if hit:
            reason, numbers = hit
            print(f"\neffsearch run: stopped: trials {', '.join(map(str, numbers))} failed with the same error "
                  f"(failure_limit: {spec.failure_limit}):\n  {reason}", file=out)
        return 1
    if not any(t.state == TrialState.COMPLETE for t in trials):
        print(f"\neffsearch run: study {spec.name!r} has no completed trial", file=out)
        return 1
    return 0
