"""No configuration is trained twice, whatever state its earlier trial is in: a COMPLETE or
PRUNED one answers, a RUNNING one (another worker's) is waited for and answers when it ends
(or this trial trains when that worker dies), a FAILED one is trained again with a note.
A scripted trainer (tests/search/test_phases.py) plays each run, so only the bookkeeping is real."""

import dataclasses
import subprocess
import threading
import time

import optuna
import pytest
from optuna.trial import TrialState

from effsearch.cli import main
from effsearch.search.pruners import NoPruner
from effsearch.search.run import objective, runner, workers
from effsearch.search.store.attrs import CONFIG_HASH_KEY, DUPLICATE_KEY, WORKER_KEY
from effsearch.search.store.heartbeat import requeue_dead_local, worker_id
from effsearch.search.store.storage import open_storage, open_url
from effsearch.search.study import studyfile
from tests.support.scripted import Scripted, scripted_train
from tests.support.tiny_study import study_file

SPACE = {"include": ["batch_size"], "ranges": {"batch_size": [32, 64]}}  # two configs: repeats certain


def trials_of(path):
    return optuna.load_study(study_name="tiny", storage=open_url(str(path.with_suffix(".journal")))).get_trials()


def note_of(path, trial) -> str:
    storage = open_url(str(path.with_suffix(".journal")))
    attrs = storage.get_study_system_attrs(storage.get_study_id_from_name("tiny"))
    return "".join(v for k, v in sorted(attrs.items()) if k.startswith(f"dashboard:{trial._trial_id}:note_str"))


@pytest.fixture
def trained(scripted, monkeypatch):
    """The config hash of every run the scripted trainer plays, in order."""
    runs = []

    def train(cfg, *args, **kwargs):
        runs.append(cfg.hash())
        return scripted_train(cfg, *args, **kwargs)

    scripted(train)
    monkeypatch.setattr(workers, "warm_up", lambda cfg, data_root=None, train_fn=None: 0.0)  # `runs` counts trials only
    return runs


def test_a_duplicate_of_a_pruned_trial_is_pruned_at_its_rung_without_training(tmp_path, trained, monkeypatch):
    class PruneBatch64(NoPruner):
        def begin(self, trial, cfg, may_prune=True):
            self.cfg, self.may = cfg, may_prune

        def on_eval(self, trial, point):
            return "pruned at rung 0 (by the test)" if self.may and self.cfg.batch_size == 64 else None

    monkeypatch.setattr(objective, "make_pruner", lambda spec, study=None: PruneBatch64())
    path = study_file(tmp_path, 8, space=SPACE)
    assert main(["run", str(path)]) == 0
    trials = trials_of(path)
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    assert len(pruned) >= 2, [t.params for t in trials]
    first, dups = pruned[0], pruned[1:]
    assert DUPLICATE_KEY not in first.user_attrs
    assert trained.count(first.user_attrs[CONFIG_HASH_KEY]) == 1  # pruned once, never trained again
    for t in dups:
        assert t.user_attrs[DUPLICATE_KEY] == first.number
        assert t.user_attrs["reason"] == "pruned at rung 0 (by the test)" and t.user_attrs["status"] == "pruned"
        assert t.user_attrs["history"] == first.user_attrs["history"]
        assert t.system_attrs.get("constraints") == first.system_attrs.get("constraints")  # what TPE learns
        assert f"duplicate of trial {first.number} (pruned)" in note_of(path, t)
    assert len(trained) == len(set(trained))  # no config trained twice


def test_a_duplicate_of_a_failed_trial_trains_again_and_says_so(tmp_path, trained, scripted):
    real = Scripted.fn  # ``trained``'s, which counts the runs

    def flaky(cfg, *args, **kwargs):
        if cfg.batch_size == 64 and not flaky.failed:
            flaky.failed = True
            raise RuntimeError("CUDA out of memory (simulated, transient)")
        return real(cfg, *args, **kwargs)

    flaky.failed = False
    scripted(flaky)
    path = study_file(tmp_path, 6, space=SPACE)
    assert main(["run", str(path)]) == 0
    trials = trials_of(path)
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(failed) == 1
    h = failed[0].user_attrs[CONFIG_HASH_KEY]
    again = [t for t in trials if t.user_attrs.get(CONFIG_HASH_KEY) == h and t.state == TrialState.COMPLETE]
    retrained = [t for t in again if DUPLICATE_KEY not in t.user_attrs]
    assert len(retrained) == 1 and trained.count(h) == 1  # trained again once; later ones answered from it
    assert (
        retrained[0]
        .user_attrs["dedupe_note"]
        .startswith(f"trial {failed[0].number} had this same config and failed (RuntimeError: CUDA out of memory")
    )
    assert "trained again, as a failure may be transient" in note_of(path, retrained[0])


# -- a duplicate of a trial another worker is running ------------------------------------------------
def _two_workers(tmp_path, monkeypatch, scripted):
    """A study whose baseline is done and two trials of one config queued (batch size 64), and a
    trainer that holds the first run of that config until ``release`` is set."""
    release, started = threading.Event(), threading.Event()

    def train(cfg, *args, **kwargs):
        if cfg.batch_size == 64 and not started.is_set():
            started.set()
            assert release.wait(60)
        return scripted_train(cfg, *args, **kwargs)

    scripted(train)  # the Objectives below take it too (EFFSEARCH_TRAIN_FN)
    monkeypatch.setattr(workers, "warm_up", lambda cfg, data_root=None, train_fn=None: 0.0)
    path = study_file(tmp_path, 1, space=SPACE, heartbeat={"interval": 1, "grace_period": 1, "max_retry": 1})
    assert main(["run", str(path)]) == 0  # the baseline
    spec = dataclasses.replace(studyfile.load(path), n_trials=3)  # the two queued below run
    study = runner.ensure_study(spec, open_storage(spec))
    for _ in range(2):
        study.enqueue_trial({"batch_size": 64})
    return spec, release, started


def _worker(spec, name, errors):
    """One worker's Objective on its own study object, running one trial, in a thread."""
    study = optuna.load_study(study_name=spec.name, storage=open_storage(spec))
    reap = lambda: requeue_dead_local(study, 1, spec.heartbeat.grace_period)  # noqa: E731
    obj = objective.Objective(spec, study, None, reap=reap)

    def run():
        try:
            study.optimize(obj, n_trials=1, catch=(objective.TrialFailed,))
        except Exception as e:  # noqa: BLE001 - a thread's error, asserted on by the test
            errors.append((name, e))

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return study, thread


def test_a_duplicate_of_a_running_trial_waits_and_is_answered_when_it_ends(tmp_path, monkeypatch, scripted):
    spec, release, started = _two_workers(tmp_path, monkeypatch, scripted)
    errors = []
    study, a = _worker(spec, "a", errors)
    assert started.wait(30)  # a trains trial 1 (held)
    _, b = _worker(spec, "b", errors)
    # b reaches its duplicate and waits, untrained (polled: a loaded machine may take seconds).
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        t = study.get_trials()
        if len(t) > 2 and CONFIG_HASH_KEY in t[2].user_attrs:
            break
        time.sleep(0.2)
    time.sleep(1.0)  # still waiting a moment later
    t = study.get_trials()
    assert t[2].state == TrialState.RUNNING and CONFIG_HASH_KEY in t[2].user_attrs
    assert "waited_for" not in t[2].user_attrs and b.is_alive()
    release.set()
    a.join(120)
    b.join(120)
    assert not errors, errors
    t = study.get_trials()
    assert t[1].state == TrialState.COMPLETE and t[2].state == TrialState.COMPLETE
    assert t[2].user_attrs[DUPLICATE_KEY] == 1 and t[2].values == t[1].values
    assert t[2].user_attrs["waited_for"]["trial"] == 1 and t[2].user_attrs["waited_for"]["its_end"] == "complete"


def test_a_duplicate_trains_when_the_trial_it_waits_for_loses_its_worker(tmp_path, monkeypatch, scripted):
    spec, release, started = _two_workers(tmp_path, monkeypatch, scripted)
    errors = []
    study, a = _worker(spec, "a", errors)
    assert started.wait(30)
    gone = subprocess.Popen(["true"])
    gone.wait()
    # a's worker "dies": its trial names a process that has exited (a itself is held in the trainer)
    held = study.get_trials()[1]
    open_storage(spec).set_trial_user_attr(held._trial_id, WORKER_KEY, {**worker_id(), "pid": gone.pid})
    _, b = _worker(spec, "b", errors)
    b.join(30)
    assert not b.is_alive()
    t = study.get_trials()
    assert t[1].state == TrialState.FAIL and t[1].user_attrs["status"] == "lost"
    assert t[2].state == TrialState.COMPLETE and DUPLICATE_KEY not in t[2].user_attrs  # trained itself
    assert t[2].user_attrs["waited_for"]["its_end"] == "fail"
    assert t[2].user_attrs["dedupe_note"].startswith("trial 1 had this same config and failed (its worker")
    release.set()
    a.join(30)  # its trial was failed meanwhile: whatever it does now cannot complete it
    assert study.get_trials()[1].state == TrialState.FAIL


# -- a trial asked for past n_trials ------------------------------------------------------------------
def test_a_trial_asked_for_when_the_study_has_its_n_trials_is_not_run(tmp_path, trained, capsys):
    """Two workers can both see n_trials - 1 done and both ask for a trial: the later one (by number)
    ends unrun, neither counted nor a failure."""
    path = study_file(tmp_path, 2, space=SPACE)
    assert main(["run", str(path)]) == 0
    assert len(trained) == 2
    spec = studyfile.load(path)
    study = optuna.load_study(study_name=spec.name, storage=open_storage(spec))
    # What the losing worker of that race does: it asks, though the study has its 2 trials.
    study.optimize(objective.Objective(spec, study, None), n_trials=1, catch=(objective.TrialFailed,))
    trials = trials_of(path)
    assert len(trials) == 3 and len(trained) == 2  # not trained
    extra = trials[-1]
    assert extra.state == TrialState.FAIL and extra.user_attrs["status"] == "surplus"
    assert "had its 2 trials" in extra.user_attrs["reason"]
    capsys.readouterr()
    assert main(["status", str(path)]) == 0
    assert "0 failed, 1 not run" in capsys.readouterr().out
