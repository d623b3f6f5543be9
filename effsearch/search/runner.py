"""`effsearch run`: the study loop.

Trials run in-process (starting Python with Composer costs ~25 s, a quickstart
trial a few seconds), one after another in each worker; ``--workers K`` starts K
worker processes on the same storage, and several machines are just several
`effsearch run` on one PostgreSQL URL (Optuna's own distributed mode). The
main process prints one line per finished trial and the Pareto front at the end.
"""

from __future__ import annotations

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
from effsearch.search.hooks import make_pruner
from effsearch.search.samplers import make_sampler
from effsearch.search.storage import (BASELINE_KEY, STATUS_KEY, WORKER_KEY, open_storage, requeue,
                                      requeue_dead_local, worker_id)


class TrialFailed(Exception):
    """A trial that failed for a recorded reason; the study goes on."""


class Objective:
    def __init__(self, spec, study, store, data_root=None):
        self.spec, self.study, self.store, self.data_root = spec, study, store, data_root
        self.pruner = make_pruner(spec.pruner, study)
        self._baseline_tta = None

    def __call__(self, trial: optuna.Trial):
        from effsearch.trainer.run import check_runnable, train

        trial.set_user_attr(WORKER_KEY, worker_id())
        is_baseline = bool(trial.user_attrs.get(BASELINE_KEY))
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
            trial.set_user_attr(STATUS_KEY, "interrupted")
            raise
        except Exception as e:  # out of memory, a CORDS error, ...: recorded, the study goes on
            _free_memory()
            self._fail(trial, "failed", f"{type(e).__name__}: {e}")
        speedup = 1.0 if is_baseline and result.reached_target else self._speedup(result)
        record.set_attrs(trial, record.result_attrs(result, speedup))
        try:
            record.upload_files(trial, self.store, result, config_yaml)
            record.save_note(trial, record.note_text(trial.number, result, report.summary(cfg.to_dict()),
                                                     speedup, is_baseline))
        except Exception as e:  # a full disk must not cost the trial
            trial.set_user_attr("artifact_error", f"{type(e).__name__}: {e}")
        if result.status == "completed":
            return O.values(result, self.spec.objectives)
        if result.status == "pruned":
            raise optuna.TrialPruned(result.reason)
        self._fail(trial, "diverged" if result.status == "diverged" else "failed", result.reason or result.status)

    def _fail(self, trial, status: str, reason: str):
        trial.set_user_attr(STATUS_KEY, status)
        trial.set_user_attr("reason", reason[:2000])
        raise TrialFailed(reason)

    def _speedup(self, result) -> float | None:
        if result.time_to_target is None:
            return None
        if self._baseline_tta is None:
            base = report.baseline_trial(self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
            self._baseline_tta = base.user_attrs.get("time_to_target") if base else None
        return self._baseline_tta / result.time_to_target if self._baseline_tta and result.time_to_target else None


def _free_memory() -> None:
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


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


class Progress:
    """One line per finished trial, with the study's standing."""

    def __init__(self, spec, study, out=None, t0: float | None = None):
        self.spec, self.out = spec, out or sys.stderr
        self.t0 = t0 if t0 is not None else time.time()
        self.seen = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}

    def __call__(self, study, trial=None) -> None:
        self.poll(study)

    def poll(self, study) -> None:
        trials = study.get_trials(deepcopy=False)
        for t in sorted((t for t in trials if t.state.is_finished() and t.number not in self.seen),
                        key=lambda t: t.number):
            self.seen.add(t.number)
            print(report.trial_line(t, self.spec.objectives, trials, study, self.spec.n_trials,
                                    time.time() - self.t0), file=self.out, flush=True)


def artifact_store(spec):
    from optuna.artifacts import FileSystemArtifactStore

    try:
        spec.artifacts.mkdir(parents=True, exist_ok=True)
        return FileSystemArtifactStore(str(spec.artifacts))
    except OSError:
        return None


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
                study._storage.set_trial_user_attr(t._trial_id, STATUS_KEY, "interrupted")
                study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
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


def work(spec, index: int = 0, data_root=None, progress: bool = False, out=None, t0=None) -> str:
    """One worker: run trials until the study has n_trials, the timeout passes, or Ctrl-C."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if spec.workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // spec.workers))
    storage = open_storage(spec)
    study = optuna.load_study(study_name=spec.name, storage=storage,
                              sampler=make_sampler(spec.sampler, spec.seed + 1000 * index))
    stop = StopAtTotal(spec.n_trials)
    if stop.reached(study):
        return "done"
    keyboard_interrupt_on_sigint()
    callbacks = [stop] + ([Progress(spec, study, out, t0)] if progress else [])
    try:
        study.optimize(Objective(spec, study, artifact_store(spec), data_root), n_trials=None,
                       timeout=spec.timeout, catch=(TrialFailed,), callbacks=callbacks,
                       # A full gc costs ~0.5 s a trial; it matters only for freeing GPU memory.
                       gc_after_trial=spec.space.machine.device == "cuda")
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C; SIGTERM arrives as Composer's sys.exit
        requeue_interrupted(study)
        return "interrupted"
    return "done"


def _worker_main(path: str, overrides: dict, index: int, data_root) -> None:
    from effsearch.search.studyfile import load

    try:
        phase = overrides.pop("phase")
        spec = phases.phase_spec(load(path, **overrides), phase)
        sys.exit(130 if work(spec, index, data_root) == "interrupted" else 0)
    except KeyboardInterrupt:
        sys.exit(130)


def run_workers(spec, study, data_root, out, t0=None) -> str:
    ctx = multiprocessing.get_context("spawn")  # fork after torch/CUDA is unsafe
    overrides = {"storage": spec.storage, "n_trials": spec.n_trials, "timeout": spec.timeout,
                 "workers": spec.workers, "phase": spec.phase}
    procs = [ctx.Process(target=_worker_main, args=(str(spec.path), overrides, i, data_root),
                         name=f"effsearch-worker-{i}") for i in range(spec.workers)]
    for p in procs:
        p.start()
    progress = Progress(spec, study, out, t0)
    try:
        while any(p.is_alive() for p in procs):
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
    bad = [p.exitcode for p in procs if p.exitcode not in (0, 130)]
    if bad:
        print(f"warning: {len(bad)} worker(s) exited with codes {bad}", file=out)
    return "interrupted" if any(p.exitcode == 130 for p in procs) else "done"


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
    """Run (or resume) a study, with its tuning phase if it has one; returns the exit code
    (130 after Ctrl-C). ``t0``: when the command started."""
    out = out or sys.stderr
    t0 = t0 or time.time()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if not phases.enabled(spec):
        return run_phase(spec, data_root, out, t0)
    tune = phases.tune_spec(spec)
    code = run_phase(tune, data_root, out, t0)
    if code:
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


def run_phase(spec, data_root, out, t0, study=None) -> int:
    """Run (or resume) one study to its n_trials."""
    storage = open_storage(spec)
    study = study or ensure_study(spec, storage)
    lost = [] if spec.is_rdb else requeue_dead_local(study, spec.heartbeat["max_retry"])
    print(header(spec, study), file=out)
    if lost:
        print(f"  re-queued trials {lost}: their worker process is gone", file=out)
    if StopAtTotal(spec.n_trials).reached(study):
        print(f"the study already has {spec.n_trials} trials; raise --n-trials to run more", file=out)
        outcome = "done"
    elif spec.workers == 1:
        outcome = work(spec, 0, data_root, progress=True, out=out, t0=t0)
    else:
        outcome = run_workers(spec, study, data_root, out, t0)
    print("", file=out)
    print(report.status_table(study, spec.objectives, show_all=False), file=out)
    print(f"\ndashboard: {dashboard_hint(spec)}", file=out)
    if outcome == "interrupted":
        print("interrupted: finished trials are kept; run the same command again to resume", file=out)
        return 130
    return 0
