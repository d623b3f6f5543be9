"""A real study on tiny data: trials record what they should, a rerun resumes,
failures and Ctrl-C are recorded and the study goes on, several workers share
the default (journal) storage."""

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

import effsearch.trainer.run as trainer_run
from effsearch.cli import main
from effsearch.config import TrainConfig
from effsearch.search import report, runner
from effsearch.search.hooks import NoPruner
from effsearch.search.storage import open_url, requeue_dead_local
from tests.conftest import tiny
from tests.tiny_study import study_file

ROOT = Path(__file__).resolve().parents[1]


def write_study(tmp_path, n_trials=3, **kw) -> Path:
    return study_file(tmp_path, n_trials, **kw)


def load(path: Path, name="tiny"):
    storage = open_url(str(path.with_suffix(".journal")))
    return optuna.load_study(study_name=name, storage=storage), storage


def test_trials_record_everything_and_a_rerun_resumes(tmp_path, capsys):
    path = write_study(tmp_path)
    assert main(["run", str(path)]) == 0
    err = capsys.readouterr().err
    assert "trial   0 baseline" in err and "front" in err and "Pareto front" in err
    study, storage = load(path)
    trials = study.get_trials()
    assert report.counts(trials)["done"] == 3 and len(trials) == 3
    assert [d.name for d in study.directions] == ["MINIMIZE", "MAXIMIZE"]
    assert trials[0].user_attrs["baseline"] is True
    assert TrainConfig.from_dict(yaml.safe_load(trials[0].user_attrs["config"])) == \
        TrainConfig.from_dict(tiny(**{"dataset.synthetic_size": 256, "epochs": 3}))  # base as it is
    system = storage.get_study_system_attrs(study._study_id)
    for t in trials:
        assert t.state == TrialState.COMPLETE, t.user_attrs.get("reason")
        a = t.user_attrs
        TrainConfig.from_dict(yaml.safe_load(a["config"]))
        assert a["history"] and {"epoch", "train_seconds", "val_accuracy"} <= set(a["history"][0])
        assert isinstance(a["reached_target"], bool) and 0 <= a["test_accuracy"] <= 1
        assert a["device"].startswith("cpu") and "optuna" in a["versions"] and "sparsity" in a
        assert a["status"] == "completed" and "train_seconds" in a
        if a["reached_target"]:
            assert t.values[0] == a["time_to_target"]
        else:
            assert t.values[0] >= 1e6
        assert t.values[1] == a["val_accuracy"]
        files = {m.filename for m in optuna.artifacts.get_all_artifact_meta(t, storage=storage)}
        assert files == {"learning_curve.png", "config.yaml", "result.json"}
        assert f"dashboard:{t._trial_id}:note_ver" in system
    assert len(list((tmp_path / "tiny.artifacts").iterdir())) == 9

    # Rerun with a larger total: the three are kept, one more runs.
    before = [(t.number, t.values, t.datetime_complete) for t in trials]
    assert main(["run", str(path), "--n-trials", "4"]) == 0
    trials = load(path)[0].get_trials()
    assert len(trials) == 4 and [(t.number, t.values, t.datetime_complete) for t in trials[:3]] == before
    # Same total again: nothing to do.
    assert main(["run", str(path), "--n-trials", "4"]) == 0
    assert "already has 4 trials" in capsys.readouterr().err
    assert len(load(path)[0].get_trials()) == 4
    assert main(["status", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Pareto front" in out and "COMPLETE*" in out and "time to target s" in out
    assert main(["status", "tiny", "--storage", str(path.with_suffix(".journal")), "--front"]) == 0
    assert "Pareto front" in capsys.readouterr().out


def test_failures_pruning_and_ctrl_c_are_recorded_and_resumed(tmp_path, capsys, monkeypatch):
    real_train, calls = trainer_run.train, []

    def train(cfg, *args, **kwargs):
        calls.append(cfg)
        if len(calls) == 2:
            raise RuntimeError("CUDA out of memory (simulated)")
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_train(cfg, *args, **kwargs)

    class PruneThird(NoPruner):
        def on_eval(self, trial, point):
            return "pruned by the test" if len(calls) == 3 else None

    monkeypatch.setattr(trainer_run, "train", train)
    monkeypatch.setattr(runner, "make_pruner", lambda spec, study=None: PruneThird())
    path = write_study(tmp_path, n_trials=5)
    assert main(["run", str(path)]) == 130
    assert "run the same command again to resume" in capsys.readouterr().err
    study, _ = load(path)
    t = study.get_trials()
    assert [x.state for x in t[:4]] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED, TrialState.FAIL]
    assert t[1].user_attrs["status"] == "failed" and "out of memory" in t[1].user_attrs["reason"]
    assert t[2].user_attrs["status"] == "pruned" and t[2].user_attrs["reason"] == "pruned by the test"
    assert t[3].user_attrs["status"] == "interrupted"
    assert t[4].state == TrialState.WAITING and t[4].params == t[3].params and t[4].user_attrs["retry_of"] == 3
    assert report.counts(t)["done"] == 3  # the interrupted trial does not count

    assert main(["run", str(path)]) == 0
    t = load(path)[0].get_trials()
    assert t[4].state == TrialState.COMPLETE and t[4].params == t[3].params
    assert t[4].system_attrs["failed_trial"] == 3
    assert report.counts(t)["done"] == 5 and len(t) == 6


def test_a_dead_local_worker_s_trial_is_requeued(tmp_path):
    from effsearch.search.storage import WORKER_KEY, worker_id

    storage = open_url(str(tmp_path / "s.journal"))
    study = optuna.create_study(study_name="s", storage=storage, directions=["minimize", "maximize"])
    trial = study.ask()
    trial.suggest_float("x", 0, 1)
    gone = subprocess.Popen(["true"])
    gone.wait()
    trial.set_user_attr(WORKER_KEY, {**worker_id(), "pid": gone.pid})
    assert requeue_dead_local(study) == [0]
    t = study.get_trials()
    assert t[0].state == TrialState.FAIL and t[1].state == TrialState.WAITING
    assert t[1].params == t[0].params and t[1].system_attrs["failed_trial"] == 0
    assert requeue_dead_local(study) == []  # a live worker's trial (this process) is left alone


@pytest.mark.slow
def test_two_workers_share_the_default_storage(tmp_path):
    base = tiny(**{"dataset.synthetic_size": 384, "epochs": 3})  # a few seconds a trial
    path = write_study(tmp_path, n_trials=6, base=base)
    env = {**os.environ, "TQDM_DISABLE": "1"}
    proc = subprocess.run([sys.executable, "-m", "effsearch.cli", "run", str(path), "--workers", "2"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "locked" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    trials = load(path)[0].get_trials()
    assert report.counts(trials)["done"] >= 6
    assert all(t.state == TrialState.COMPLETE for t in trials), [t.user_attrs.get("reason") for t in trials]
    assert len({t.user_attrs["worker"]["pid"] for t in trials}) == 2  # both workers ran trials
    assert sum(t.user_attrs.get("baseline", False) for t in trials) == 1
