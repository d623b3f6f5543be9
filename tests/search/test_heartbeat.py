"""The journal storage's heartbeat (search/store/heartbeat.py: JournalHeartbeat, requeue_dead_local).

A journal file has no heartbeats of Optuna's own: each worker's JournalHeartbeat thread stamps
its running trial, and the other workers fail (and queue again) a trial whose stamp is older
than the grace period. Here with real worker processes: one alive but stopped (SIGSTOP: it
holds its trial and sends nothing, as a hung worker would), one healthy."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest
from optuna.trial import TrialState

from effsearch.config.options import Heartbeat
from effsearch.search.run import workers
from effsearch.search.run.budget import StopAtTotal
from effsearch.search.store.attrs import HEARTBEAT_KEY, WORKER_KEY
from effsearch.search.store.heartbeat import requeue_dead_local
from effsearch.search.store.storage import open_url
from tests.support.helpers import logged_warnings
from tests.support.scripted import scripted_train

ROOT = Path(__file__).resolve().parents[2]
GRACE = 6.0  # seconds; the workers beat every 0.2 s (wide: a loaded machine delays both the beats and the checks)

# A worker as effsearch's Objective starts a trial: ask, say who runs it, beat every 0.2 s; then
# it "trains" (sleeps) until killed.
WORKER = """
import sys, time, optuna
from effsearch.search.store.heartbeat import JournalHeartbeat, worker_id
from effsearch.search.store.attrs import WORKER_KEY
from effsearch.search.store.storage import open_url, trial_id
study = optuna.load_study(study_name="s", storage=open_url(sys.argv[1]))
trial = study.ask()
trial.suggest_float("x", 0, 1)
trial.set_user_attr(WORKER_KEY, worker_id())
JournalHeartbeat(study._storage, 0.2).beat(trial_id(trial))
print(trial.number, flush=True)
time.sleep(600)
"""


@pytest.fixture
def two_workers(tmp_path):
    """A study with two trials RUNNING in two live worker processes: (study, hung, healthy),
    each a (process, trial number); ``hung`` is stopped once its trial has a stamp."""
    path = str(tmp_path / "s.journal")
    study = optuna.create_study(study_name="s", storage=open_url(path), directions=["minimize", "maximize"])
    procs = []
    try:
        for _ in range(2):
            p = subprocess.Popen([sys.executable, "-c", WORKER, path], cwd=ROOT, stdout=subprocess.PIPE, text=True)
            procs.append(p)
            number = int(p.stdout.readline())  # its trial is asked for, attributed and stamped
            procs[-1] = (p, number)
        hung, healthy = procs
        os.kill(hung[0].pid, signal.SIGSTOP)
        yield study, hung, healthy
    finally:
        for p in procs:
            p = p[0] if isinstance(p, tuple) else p
            p.kill()  # a stopped process too
            p.wait(10)
            p.stdout.close()


def _stamp(study, number):
    return study.get_trials(deepcopy=False)[number].system_attrs.get(HEARTBEAT_KEY)


def _wait_past_the_grace_period(study):
    """Until every stamp there is now is older than the grace period: a worker that still beats
    has stamped again since; the stopped one has not."""
    first = {t.number: t.system_attrs[HEARTBEAT_KEY] for t in study.get_trials(deepcopy=False)}
    time.sleep(max(0.0, max(first.values()) + GRACE + 0.5 - time.time()))
    return first


def test_a_live_worker_that_stopped_beating_loses_its_trial_and_a_healthy_one_keeps_its(two_workers):
    study, (hung, hung_trial), (healthy, healthy_trial) = two_workers
    assert requeue_dead_local(study, max_retry=2, grace_period=GRACE) == []  # both stamped just now
    first = _wait_past_the_grace_period(study)
    assert hung.poll() is None and healthy.poll() is None  # both processes alive
    assert _stamp(study, hung_trial) == first[hung_trial]  # the stopped worker sent nothing since
    healthy_stamp = _stamp(study, healthy_trial)
    # Without a grace period (a worker starting up, the runner's first look) only a process that
    # is gone counts: both live.
    assert requeue_dead_local(study, max_retry=2) == []

    assert requeue_dead_local(study, max_retry=2, grace_period=GRACE) == [hung_trial]

    t = study.get_trials()
    lost, kept, retry = t[hung_trial], t[healthy_trial], t[2]
    assert lost.state == TrialState.FAIL and lost.user_attrs["status"] == "lost"
    assert f"pid {hung.pid}" in lost.user_attrs["reason"] and "no heartbeat" in lost.user_attrs["reason"]
    assert "alive" in lost.user_attrs["reason"]
    assert kept.state == TrialState.RUNNING and _stamp(study, healthy_trial) >= healthy_stamp > first[healthy_trial]
    assert retry.state == TrialState.WAITING and retry.params == lost.params
    assert retry.user_attrs["retry_of"] == hung_trial and retry.system_attrs["retry_history"] == [hung_trial]
    assert len(t) == 3

    # Resumed, the stopped worker stamps a finished trial: nothing changes, and it does not crash.
    os.kill(hung.pid, signal.SIGCONT)
    time.sleep(1.0)
    assert hung.poll() is None
    t = study.get_trials()
    assert t[hung_trial].state == TrialState.FAIL and len(t) == 3
    assert requeue_dead_local(study, max_retry=2, grace_period=GRACE) == []


def test_a_surviving_worker_goes_on_to_run_the_hung_worker_s_trial(two_workers):
    """The study wants two trials, both running: a surviving worker waits while they run
    (``wait_for_others``), and once one's worker stops beating it is failed and queued again, and
    the survivor goes on (True) to run it; it does not wait for the hung worker until its timeout."""
    study, (hung, hung_trial), _ = two_workers
    spec = SimpleNamespace(is_rdb=False, timeout=600, heartbeat=Heartbeat(interval=1, grace_period=GRACE, max_retry=1))
    # True: it goes on because the hung trial was queued again (at its timeout it returns False).
    assert workers.wait_for_others(spec, study, StopAtTotal(2), time.time()) is True
    t = study.get_trials()
    assert t[hung_trial].state == TrialState.FAIL and t[2].state == TrialState.WAITING
    assert hung.poll() is None


def test_a_worker_on_another_machine_is_judged_by_its_stamp(tmp_path):
    """A worker elsewhere cannot be asked whether its process lives: a stale stamp loses its
    trial, a fresh one keeps it (and so does a stale stamp with no grace period given)."""
    study = optuna.create_study(
        study_name="s", storage=open_url(str(tmp_path / "s.journal")), directions=["minimize", "maximize"]
    )
    for stamp in (time.time() - 10, time.time()):
        trial = study.ask()
        trial.suggest_float("x", 0, 1)
        trial.set_user_attr(WORKER_KEY, {"host": "another-machine", "pid": os.getpid(), "id": "x"})
        study._storage.set_trial_system_attr(trial._trial_id, HEARTBEAT_KEY, stamp)
    assert requeue_dead_local(study, max_retry=1) == []
    assert requeue_dead_local(study, max_retry=1, grace_period=5) == [0]
    t = study.get_trials()
    assert t[0].state == TrialState.FAIL and "another-machine" in t[0].user_attrs["reason"]
    assert t[1].state == TrialState.RUNNING and t[2].state == TrialState.WAITING


def test_this_process_never_judges_its_own_trial(tmp_path):
    """A stale stamp on a trial this very process runs (its heartbeat thread starved, or the
    machine slept): the process doing the check is not hung, so the trial stays."""
    from effsearch.search.store.heartbeat import worker_id

    study = optuna.create_study(
        study_name="s", storage=open_url(str(tmp_path / "s.journal")), directions=["minimize", "maximize"]
    )
    trial = study.ask()
    trial.set_user_attr(WORKER_KEY, worker_id())
    study._storage.set_trial_system_attr(trial._trial_id, HEARTBEAT_KEY, time.time() - 100)
    assert requeue_dead_local(study, max_retry=1, grace_period=5) == []
    assert study.get_trials()[0].state == TrialState.RUNNING


# -- a worker that comes back ----------------------------------------------------------------------
# A real effsearch worker (workers.work, the Objective) with a scripted trainer: its first
# training prints "training" and waits for the file argv[2] (so the test can stop it mid-trial);
# every training after that returns at once.
LATE_WORKER = """
import sys, time
from pathlib import Path
from effsearch.cli import console, quiet_optuna
from effsearch.search.study import studyfile
from effsearch.search.run import workers
from tests.support.scripted import scripted_train
go, calls = Path(sys.argv[2]), []
def train(cfg, **kw):
    calls.append(cfg)
    if len(calls) == 1:
        print("training", flush=True)
        while not go.exists():
            time.sleep(0.05)
    return scripted_train(cfg, **kw)
with console(), quiet_optuna():  # as a worker of the command's: its logs printed, Optuna's errors only
    code = workers.WORKER_EXIT[workers.work(studyfile.load(sys.argv[1]), warm=False, train_fn=train)]
sys.exit(code)
"""


def test_a_stopped_worker_whose_trial_was_taken_over_drops_its_result_and_goes_on(tmp_path):
    """Stopped (SIGSTOP) mid-trial, the worker loses its trial to the others (failed, queued
    again); resumed (SIGCONT), it finishes training a trial that is no longer its own. It
    must not crash on telling Optuna a FAIL trial: it drops the result (its times hold the
    time it was stopped), says so once, runs the study's remaining trials and exits 0."""
    from effsearch.search.run import runner
    from effsearch.search.run.budget import spent
    from effsearch.search.store.storage import open_storage
    from effsearch.search.study import studyfile
    from tests.support.tiny_study import study_file

    path = study_file(tmp_path, 2, heartbeat={"interval": 1, "grace_period": GRACE, "max_retry": 2})
    spec = studyfile.load(path)
    study = runner.ensure_study(spec, open_storage(spec))
    go = tmp_path / "go"
    p = subprocess.Popen(
        [sys.executable, "-c", LATE_WORKER, str(path), str(go)],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert p.stdout.readline() == "training\n"  # trial 0 (the baseline) is running, stamped
        os.kill(p.pid, signal.SIGSTOP)
        _wait_past_the_grace_period(study)
        assert requeue_dead_local(study, max_retry=2, grace_period=GRACE) == [0]
        go.touch()
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=300)
    finally:
        p.kill()
        p.wait(10)
    assert p.returncode == 0, err
    t = study.get_trials()
    assert [x.state for x in t] == [TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE], err
    assert t[0].user_attrs["status"] == "lost" and t[1].user_attrs["retry_of"] == 0  # the retry ran
    assert t[1].user_attrs.get("baseline") and "duplicate_of" not in t[1].user_attrs  # trained, as itself
    assert err.count("warning:") == 1 and "trial 0" in err and "dropped" in err, err
    assert "Traceback" not in err, err
    assert spent(t) == t[1].user_attrs["wall_seconds"] + t[2].user_attrs["wall_seconds"]  # counted once each


def _take_over_running(study):
    """What the other workers do to a trial whose heartbeat went stale (heartbeat.requeue_dead_local):
    fail it as lost, queue it again, note it; here in the worker's own process, mid-trial."""
    from effsearch.search.store.storage import mark_failed, requeue, save_note_by_id

    (t,) = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    mark_failed(study, t, "lost", "its worker sent no heartbeat for 9 s (simulated)")
    requeue(study, t, "simulated")
    save_note_by_id(study, t, f"### Trial {t.number}: lost\n\nsimulated")
    return t.number


def _in_process_study(tmp_path, **changes):
    """A tiny study's spec and study, its baseline queued; a test's worker runs it (``workers.work``)."""
    from effsearch.search.run import runner
    from effsearch.search.store.storage import open_storage
    from effsearch.search.study import studyfile
    from tests.support.tiny_study import study_file

    spec = studyfile.load(study_file(tmp_path, 2, **changes))
    return spec, runner.ensure_study(spec, open_storage(spec))


@pytest.mark.parametrize("rdb", [False, True], ids=["journal", "sqlite"])
def test_a_trial_taken_over_mid_training_is_dropped_at_its_next_write(tmp_path, caplog, rdb):
    """Taken over while it trains, the worker learns it at its next write (the pruner's rung
    record): the training stops there, dropped, and the worker runs the retry. An RDB storage
    (Optuna's heartbeats) refuses the write the same way."""
    from effsearch.search.run.budget import spent

    taken = []

    def train(cfg, **kw):
        if not taken:
            taken.append(_take_over_running(study))
        return scripted_train(cfg, **kw)

    spec, study = _in_process_study(
        tmp_path,
        pruner={"name": "moasha", "min_trials": 2},
        **({"storage": f"sqlite:///{tmp_path / 'tiny.db'}"} if rdb else {}),
    )
    assert workers.work(spec, warm=False, train_fn=train) == "done"
    err = logged_warnings(caplog)
    t = study.get_trials()
    assert taken == [0] and [x.state for x in t[:2]] == [TrialState.FAIL, TrialState.COMPLETE] and len(t) == 3
    assert t[2].state in (TrialState.COMPLETE, TrialState.PRUNED)  # the study's second trial, which MO-ASHA may stop
    assert "rung_0" not in t[0].user_attrs and "wall_seconds" not in t[0].user_attrs  # nothing written after
    assert len(err.splitlines()) == 1 and "was training it" in err and "queued again as trial 1" in err, err
    assert "not counted" in err, err
    assert spent(t) == t[1].user_attrs["wall_seconds"] + t[2].user_attrs["wall_seconds"]
    attrs = study._storage.get_study_system_attrs(study._study_id)  # optuna-dashboard keeps notes there
    note = "".join(v for k, v in sorted(attrs.items()) if k.startswith(f"dashboard:{t[0]._trial_id}:note_str"))
    assert "no heartbeat for 9 s (simulated)" in note and "dropped its result" in note, note


def test_a_trial_taken_over_after_its_last_write_is_dropped_when_optuna_refuses_its_end(tmp_path, monkeypatch, caplog):
    """Taken over between its last write (its wall seconds) and Optuna's tell: the tell raises
    "Cannot tell a FAIL trial"; the worker drops it and goes on. Its wall seconds were written
    before it was lost: they count, once."""
    from effsearch.search.run import objective
    from effsearch.search.run.budget import spent

    real, taken = objective.Objective._record_wall, []

    def record_wall(self, trial, seconds):
        real(self, trial, seconds)
        if not taken:
            taken.append(_take_over_running(self.study))

    monkeypatch.setattr(objective.Objective, "_record_wall", record_wall)
    spec, study = _in_process_study(tmp_path)
    assert workers.work(spec, warm=False, train_fn=scripted_train) == "done"
    err = logged_warnings(caplog)
    t = study.get_trials()
    assert taken == [0] and [x.state for x in t] == [TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE]
    assert len(err.splitlines()) == 1 and "finished training it" in err and "written before, count" in err, err
    assert spent(t) == sum(x.user_attrs["wall_seconds"] for x in t)


def test_a_failure_that_is_not_a_take_over_still_stops_the_worker(tmp_path, monkeypatch):
    """The worker drops only what the others took over: any other error out of a trial's
    recording still ends the worker with it."""
    # The timeout: a worker that took the error for a take-over would go on failing trials forever.
    spec, study = _in_process_study(tmp_path, timeout=30)

    def broken(*args, **kwargs):
        raise ValueError("a bug in recording (simulated)")

    monkeypatch.setattr(workers.Objective, "_record_wall", broken)
    with pytest.raises(ValueError, match="simulated"):
        workers.work(spec, warm=False, train_fn=scripted_train)


def test_ctrl_c_in_a_trial_taken_over_still_stops_the_worker(tmp_path, caplog):
    """Ctrl-C while training a trial the others took over: the worker drops the trial and
    stops as interrupted (it does not take the refused tell for a reason to go on)."""

    def train(cfg, **kw):
        _take_over_running(study)
        raise KeyboardInterrupt

    spec, study = _in_process_study(tmp_path)
    assert workers.work(spec, warm=False, train_fn=train) == "interrupted"
    t = study.get_trials()
    assert [x.state for x in t] == [TrialState.FAIL, TrialState.WAITING] and t[0].user_attrs["status"] == "lost"
    assert len(logged_warnings(caplog).splitlines()) == 1
