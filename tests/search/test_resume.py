"""Trials that survive a lost worker (``checkpoint_every``): a worker SIGKILLed mid-trial, another
`effsearch run` re-queues its trial and resumes it from its last checkpoint. The resumed curve is
the uninterrupted run's (the same seed, points and accuracies; the study's warm start trains that
very config from the start, in the same process), its time to target sums the training of both
segments, and the study's compute counts the lost segment once (its wall seconds, written with
each checkpoint) and the retry's own segment once. tests/search/test_postgres.py does the same on
PostgreSQL, and with two "nodes"."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import yaml
from optuna.trial import TrialState

from effsearch.cli import main
from effsearch.search.run.budget import spent
from effsearch.search.store.attrs import CHECKPOINT_KEY, RESUMED_KEY
from effsearch.search.store.storage import open_url
from tests.support.helpers import tiny

ROOT = Path(__file__).resolve().parents[2]
EPOCHS = 24


def resume_study(folder: Path, name: str = "resume", **changes) -> Path:
    """The baseline (trial 0, killed mid-way), then a warm start of the very same config (trained
    whole: the uninterrupted run of the same seed); ``dedupe: false`` trains it again."""
    d = {
        "name": name,
        "base": tiny(**{"dataset.synthetic_size": 640, "epochs": EPOCHS, "target_accuracy": 0.6}),
        "n_trials": 2,
        "warm_start": [{}],
        "dedupe": False,
        "max_slowdown": None,
        "space": {"include": ["optimizer"]},
        "checkpoint_every": 0.05,
        "heartbeat": {"interval": 1, "grace_period": 3, "max_retry": 2},
        **changes,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def start(path: Path, *args: str, env: dict | None = None, log: Path | None = None) -> subprocess.Popen:
    out = open(log or path.with_suffix(".log"), "a")
    return subprocess.Popen(
        [sys.executable, "-m", "effsearch.cli", "run", str(path), *args],
        cwd=ROOT,
        env={**os.environ, "TQDM_DISABLE": "1", **(env or {})},
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill_when(
    proc: subprocess.Popen, study_name: str, storage: str, log: Path, chosen, deadline: float = 400.0
) -> dict:
    """SIGKILL ``proc``'s process group once one of the study's trials is RUNNING with a checkpoint
    and ``chosen(trial, checkpoint, trials)`` holds; that checkpoint's record."""
    store, end = open_url(storage), time.time() + deadline
    while time.time() < end and proc.poll() is None:
        if study_name in optuna.get_all_study_names(store):
            trials = optuna.load_study(study_name=study_name, storage=store).get_trials()
            for t in trials:
                ckpt = t.user_attrs.get(CHECKPOINT_KEY)
                if t.state == TrialState.RUNNING and ckpt and chosen(t, ckpt, trials):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return {"trial": t.number, **ckpt}
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError(f"no checkpointed trial to kill seen:\n{log.read_text()[-3000:]}")


def kill_at_checkpoint(proc: subprocess.Popen, study_name: str, storage: str, past: float, log: Path) -> dict:
    """Kill ``proc`` once one of its trials has a checkpoint past epoch ``past``."""
    return kill_when(proc, study_name, storage, log, lambda t, ckpt, trials: ckpt["epoch"] >= past)


def check_resumed(study: optuna.Study, lost: dict, artifacts: Path, second: float) -> None:
    """The retry resumed from ``lost``'s checkpoint and went on as the uninterrupted run did; the
    checkpoint files are gone once it is over. ``second``: the seconds the second worker, which ran
    the retry and the uninterrupted run, took."""
    trials = {t.number: t for t in study.get_trials()}
    dead = trials[lost["trial"]]
    retry = next(t for t in trials.values() if t.system_attrs.get("failed_trial") == lost["trial"])
    whole = next(t for t in trials.values() if t.user_attrs.get("warm_start"))
    assert dead.state == TrialState.FAIL and retry.state == whole.state == TrialState.COMPLETE
    assert retry.user_attrs[RESUMED_KEY]["trial"] == lost["trial"]
    assert retry.user_attrs[RESUMED_KEY]["train_seconds"] >= lost["train_seconds"]  # the last one it saved
    assert retry.user_attrs["segments"] == 2 and retry.user_attrs["restore_seconds"] > 0

    def curve(t):
        return [(p["epoch"], p["val_accuracy"], p["val_loss"], p.get("val_images")) for p in t.user_attrs["history"]]

    assert curve(retry) == curve(whole) and len(curve(whole)) == EPOCHS
    assert retry.user_attrs["val_accuracy"] == whole.user_attrs["val_accuracy"]
    # Time to target: training seconds summed across both segments; the restore is apart.
    at = retry.user_attrs[RESUMED_KEY]["train_seconds"]
    points = retry.user_attrs["history"]
    assert all(p["train_seconds"] <= at for p in points if p["epoch"] <= retry.user_attrs[RESUMED_KEY]["epoch"])
    assert all(p["train_seconds"] > at for p in points if p["epoch"] > retry.user_attrs[RESUMED_KEY]["epoch"])
    assert retry.user_attrs["train_seconds"] > at and retry.user_attrs["time_to_target"] is not None
    # Compute: the lost segment counted once (its wall seconds as of its last checkpoint), the
    # retry's own segment once: the retry and the whole run fit in the second worker's lifetime
    # (no comparison of the two: the retry, that worker's first trial, pays its first imports).
    w_dead, w_retry, w_whole = (t.user_attrs["wall_seconds"] for t in (dead, retry, whole))
    assert w_dead >= lost["train_seconds"] and w_retry + w_whole <= second
    assert spent(trials.values()) == w_dead + w_retry + w_whole
    assert artifacts.is_dir() and not list(artifacts.glob("checkpoint-*"))


def test_a_worker_killed_mid_trial_is_resumed_from_its_checkpoint_by_another(tmp_path):
    path = resume_study(tmp_path)
    storage = str(tmp_path / "resume.journal")
    first = start(path, log=tmp_path / "a.log")
    lost = kill_at_checkpoint(first, "resume", storage, EPOCHS * 2 / 3, tmp_path / "a.log")
    assert lost["trial"] == 0  # the baseline, run first
    # Another worker re-queues the lost trial and resumes it: a fresh process as the first was, so
    # both segments and the uninterrupted run train with the same threads (a test process's own
    # count depends on the tests before it).
    began = time.monotonic()
    second = start(path, log=tmp_path / "b.log")
    assert second.wait(timeout=600) == 0, (tmp_path / "b.log").read_text()[-2000:]
    check_resumed(
        optuna.load_study(study_name="resume", storage=open_url(storage)),
        lost,
        tmp_path / "resume.artifacts",
        time.monotonic() - began,
    )


def test_a_checkpointed_study_refuses_an_artifact_folder_it_cannot_write(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):  # root writes anywhere: a file where the folder should be
            folder.chmod(0o700)
            folder.rmdir()
            folder.write_text("")
        path = resume_study(tmp_path, artifacts="ro/sub")
        assert main(["run", str(path)]) == 2
        err = capsys.readouterr().err
        assert "resume.yaml: artifacts: cannot" in err and "checkpoint_every" in err, err
        assert not (tmp_path / "resume.journal").exists()  # refused before trial 0: nothing written
    finally:
        if folder.is_dir():
            folder.chmod(0o700)


def test_checkpoint_every_must_be_a_positive_number(tmp_path, capsys):
    for value, words in ((-1, "must be > 0; got -1"), ("often", "must be a number, got 'often'")):
        assert main(["run", str(resume_study(tmp_path, checkpoint_every=value))]) == 2
        err = capsys.readouterr().err
        assert f"resume.yaml: checkpoint_every: {words}" in err, err


def test_a_trial_stopped_by_ctrl_c_resumes_from_its_checkpoint_when_run_again(tmp_path):
    """Ctrl-C queues the running trial again (as before); its checkpoints stay, and the next run of the
    same command resumes it from the last one instead of training it from the start."""
    from effsearch.search.run import runner, workers
    from effsearch.search.store.storage import open_storage
    from effsearch.search.study import studyfile
    from effsearch.trainer.training import train as real

    stopped = []

    def train(cfg, **kw):
        inner = kw["on_eval"]

        def on_eval(point):
            if point.epoch >= 3 and not stopped:
                stopped.append(point.epoch)
                raise KeyboardInterrupt
            return inner(point)

        return real(cfg, **{**kw, "on_eval": on_eval})

    # A checkpoint at every epoch end, however fast the epochs: one before the stop at epoch 3, always.
    spec = studyfile.load(
        resume_study(tmp_path, n_trials=1, warm_start=[], base=tiny(**{"epochs": 6}), checkpoint_every=1e-6)
    )
    study = runner.ensure_study(spec, open_storage(spec))
    assert workers.work(spec, warm=False, train_fn=train) == "interrupted"
    assert workers.work(spec, warm=False, train_fn=train) == "done"
    first, retry = study.get_trials()
    assert first.user_attrs["status"] == "interrupted" and retry.state == TrialState.COMPLETE
    assert retry.user_attrs[RESUMED_KEY]["trial"] == 0 and 1 <= retry.user_attrs[RESUMED_KEY]["epoch"] < 3
    assert [p["epoch"] for p in retry.user_attrs["history"]] == [1, 2, 3, 4, 5, 6]


def test_a_finished_retry_removes_the_files_a_killed_worker_left_unnamed_or_not_yet_removed(tmp_path):
    """A worker killed between writing a checkpoint and naming it, or between naming it and
    removing the one before, leaves a file no record names; the retry's end removes those too,
    and nothing of another trial."""
    from optuna.artifacts import FileSystemArtifactStore

    from effsearch.search.store import checkpoints
    from effsearch.search.store.storage import requeue, trial_id

    folder = tmp_path / "artifacts"
    folder.mkdir()
    store = FileSystemArtifactStore(str(folder))
    study = optuna.create_study(storage=open_url(str(tmp_path / "s.journal")), directions=["minimize"])
    lost, other = study.ask(), study.ask()
    src = tmp_path / "state.pt"
    src.write_bytes(b"state")
    for t in (lost, other):
        checkpoints.save(t, store, src, {"epoch": 1}, "h")
    (folder / f"{checkpoints.prefix(trial_id(lost))}unnamed.pt").write_bytes(b"half")  # killed before naming
    study.tell(lost, state=TrialState.FAIL)
    requeue(study, study.get_trials()[lost.number], "lost")
    retry = study.ask()
    checkpoints.save(retry, store, src, {"epoch": 2}, "h")
    checkpoints.sweep(folder, study, retry)
    assert [p.name for p in folder.iterdir()] == [other.user_attrs[CHECKPOINT_KEY]["artifact_id"]]


def test_a_worker_stopped_while_it_records_a_trained_trial_leaves_its_checkpoint_to_the_retry(tmp_path, monkeypatch):
    """Training over, the trial's results being written (Ctrl-C here; SIGKILL alike): its checkpoint
    files stay until the trial's end is recorded, so the retry resumes from the last one instead of
    training from the start."""
    from effsearch.search.run import runner, workers
    from effsearch.search.run.objective import Objective
    from effsearch.search.store.storage import open_storage
    from effsearch.search.study import studyfile

    record, stopped = Objective._record, []

    def stop_once(self, *args, **kwargs):
        if not stopped:
            stopped.append(True)
            raise KeyboardInterrupt
        return record(self, *args, **kwargs)

    monkeypatch.setattr(Objective, "_record", stop_once)
    spec = studyfile.load(
        resume_study(tmp_path, n_trials=1, warm_start=[], base=tiny(**{"epochs": 4}), checkpoint_every=1e-6)
    )
    study = runner.ensure_study(spec, open_storage(spec))
    assert workers.work(spec, warm=False) == "interrupted"
    assert workers.work(spec, warm=False) == "done"
    first, retry = study.get_trials()
    assert first.user_attrs["status"] == "interrupted" and retry.state == TrialState.COMPLETE
    assert retry.user_attrs[RESUMED_KEY]["trial"] == 0, retry.user_attrs.get("warnings")
    assert not list((tmp_path / "resume.artifacts").glob("checkpoint-*"))  # removed once the retry is recorded
