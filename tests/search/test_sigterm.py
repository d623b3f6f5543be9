"""SIGTERM to `effsearch run --workers 2` (what a scheduler or `kill` sends the main process only)
stops the study as Ctrl-C does: the workers are told, their running trials are queued again, and
the command exits 130. It had exited 143 only after its workers, never told, ran the whole study."""

import os
import signal
import time

import optuna
from optuna.trial import TrialState

from effsearch.search.run.objective import TRAIN_FN_ENV
from effsearch.search.store.storage import open_url
from tests.search.test_resume import start
from tests.support.scripted import scripted_train
from tests.support.tiny_study import study_file


def slow_train(cfg, **kwargs):
    """A trial of a few seconds (worker processes import it by name): SIGTERM lands mid-trial."""
    time.sleep(3)
    return scripted_train(cfg, **kwargs)


def test_sigterm_to_the_main_process_stops_its_workers_and_queues_their_trials(tmp_path):
    n = 12
    path = study_file(tmp_path, n, workers=2)
    proc = start(path, env={TRAIN_FN_ENV: f"{__name__}:slow_train"}, log=tmp_path / "run.log")
    journal = str(path.with_suffix(".journal"))
    try:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:  # both workers mid-trial, baseline done
            try:
                trials = optuna.load_study(study_name="tiny", storage=open_url(journal)).get_trials()
            except Exception:  # noqa: BLE001 - the journal is not written yet
                trials = []
            done = sum(t.state == TrialState.COMPLETE for t in trials)
            if done >= 1 and sum(t.state == TrialState.RUNNING for t in trials) == 2:
                break
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)  # the main process only
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "run.log").read_text()
    assert code == 130, log[-2000:]
    assert "stopping: waiting for the workers" in log
    trials = optuna.load_study(study_name="tiny", storage=open_url(journal)).get_trials()
    assert not any(t.state == TrialState.RUNNING for t in trials)
    assert sum(t.state == TrialState.COMPLETE for t in trials) < n  # stopped, not run to the end
    assert any(t.user_attrs.get("status") == "interrupted" for t in trials)  # queued again
