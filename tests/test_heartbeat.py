"""The journal storage's heartbeat (search/storage.py: JournalHeartbeat, requeue_dead_local).

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

from effsearch.search import workers
from effsearch.search.budget import StopAtTotal
from effsearch.search.storage import HEARTBEAT_KEY, WORKER_KEY, open_url, requeue_dead_local

ROOT = Path(__file__).resolve().parents[1]
GRACE = 6.0  # seconds; the workers beat every 0.2 s (wide: a loaded machine delays both the beats and the checks)

# A worker as effsearch's Objective starts a trial: ask, say who runs it, beat every 0.2 s; then
# it "trains" (sleeps) until killed.
WORKER = """
import sys, time, optuna
from effsearch.search.storage import JournalHeartbeat, WORKER_KEY, open_url, trial_id, worker_id
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
    spec = SimpleNamespace(is_rdb=False, timeout=600, heartbeat={"interval": 1, "grace_period": GRACE, "max_retry": 1})
    # True: it goes on because the hung trial was queued again (at its timeout it returns False).
    assert workers.wait_for_others(spec, study, StopAtTotal(2), time.time()) is True
    t = study.get_trials()
    assert t[hung_trial].state == TrialState.FAIL and t[2].state == TrialState.WAITING
    assert hung.poll() is None


def test_a_worker_on_another_machine_is_judged_by_its_stamp(tmp_path):
    """A worker elsewhere cannot be asked whether its process lives: a stale stamp loses its
    trial, a fresh one keeps it (and so does a stale stamp with no grace period given)."""
    study = optuna.create_study(study_name="s", storage=open_url(str(tmp_path / "s.journal")),
                                directions=["minimize", "maximize"])
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
    from effsearch.search.storage import worker_id

    study = optuna.create_study(study_name="s", storage=open_url(str(tmp_path / "s.journal")),
                                directions=["minimize", "maximize"])
    trial = study.ask()
    trial.set_user_attr(WORKER_KEY, worker_id())
    study._storage.set_trial_system_attr(trial._trial_id, HEARTBEAT_KEY, time.time() - 100)
    assert requeue_dead_local(study, max_retry=1, grace_period=5) == []
    assert study.get_trials()[0].state == TrialState.RUNNING
