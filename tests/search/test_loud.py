"""No failure passes in silence: each one fails the run naming its cause, or the run goes on
with a warning printed once and recorded where the user looks (the header, a trial's
attributes, result.json). A scripted trainer stands in for training where only the study's
bookkeeping is under test."""

import sys

import optuna
import pytest
import torch
import torch.nn.functional as F
from optuna.trial import TrialState

import effsearch.trainer.training as trainer_run
from effsearch.cli import main
from effsearch.config import ConfigError, TrainConfig
from effsearch.search.run import warmstart, workers
from effsearch.search.store import record, storage
from effsearch.search.store.attrs import WALL_KEY
from effsearch.search.store.storage import open_url
from effsearch.trainer.techniques.kfac import KFACSGD
from tests.support.helpers import logged_warnings, tiny
from tests.support.tiny_study import study_file


def trials_of(path, name="tiny"):
    return optuna.load_study(study_name=name, storage=open_url(str(path.with_suffix(".journal")))).get_trials()


# -- an artifact folder that cannot be made ---------------------------------------------------
def test_an_artifact_folder_that_cannot_be_made_is_a_warning_not_a_path(tmp_path, scripted, capsys):
    (tmp_path / "blocker").write_text("a file where the folder's parent should be")
    path = study_file(tmp_path, 2, artifacts="blocker/arts")
    assert main(["run", str(path)]) == 0
    err = capsys.readouterr().err
    missing = tmp_path / "blocker" / "arts"
    assert "artifacts  none: cannot create" in err and str(missing) in err, err
    assert f"--artifact-dir {missing}" not in err  # the dashboard hint names no folder that is not there
    for t in trials_of(path):  # each trial says why it has no files
        assert "cannot create" in t.user_attrs["artifact_error"]


# -- --warm-start ------------------------------------------------------------------------------
class _Study:
    study_name = "earlier"

    def __init__(self, error):
        self.error = error

    def get_trials(self, *args, **kwargs):
        raise self.error


def test_a_storage_error_reading_the_warm_start_front_fails_the_run():
    """queries.front answers [] (with a warning) when the storage does not: --warm-start then
    queued nothing and the study carried on. A ConfigError naming --warm-start is exit 2."""
    from sqlalchemy.exc import OperationalError

    with pytest.raises(ConfigError) as e:
        warmstart.front_configs(_Study(OperationalError("SELECT", {}, Exception("server closed the connection"))))
    assert e.value.field == "--warm-start" and "server closed the connection" in str(e.value)
    assert "earlier" in str(e.value)


def test_warm_start_naming_a_missing_file_names_the_flag_and_the_path(tmp_path, capsys):
    path = study_file(tmp_path, 2)
    missing = tmp_path / "nowhere" / "best.yaml"
    assert main(["run", str(path), "--warm-start", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "--warm-start" in err and str(missing) in err, err
    assert not path.with_suffix(".journal").exists()  # checked before anything is written


# -- K-FAC's fallbacks -------------------------------------------------------------------------
def _always_fails(M, *a, **k):
    raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge")


def test_kfac_counts_its_fallbacks_to_plain_sgd_and_warns_once(monkeypatch, caplog):
    torch.manual_seed(0)
    lin = torch.nn.Linear(5, 3)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    opt = KFACSGD(lin.parameters(), lin, lr=0.1, momentum=0.0, update_every=1, kl_clip=None)
    monkeypatch.setattr(torch.linalg, "eigh", _always_fails)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(lin(x), y).backward()
        opt.step()
    got = opt.fallbacks()
    assert got["failed_decompositions"] == 3 and got["plain_steps"] == 3 and got["layers"] == ["Linear"]
    said = logged_warnings(caplog)
    assert said.count("K-FAC") == 1 and "plain SGD" in said, said


def test_kfac_counts_a_shape_mismatch(caplog):
    torch.manual_seed(0)
    lin = torch.nn.Linear(5, 3)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    opt = KFACSGD(lin.parameters(), lin, lr=0.1, momentum=0.0, update_every=100, kl_clip=None)
    F.cross_entropy(lin(x), y).backward()
    opt.step()  # decomposed: the next step preconditions
    layer = opt.layers[lin]
    layer.QA, layer.dA = torch.eye(4), torch.ones(4)  # a factor for another shape than the gradient's
    opt.zero_grad()
    F.cross_entropy(lin(x), y).backward()
    opt.step()
    got = opt.fallbacks()
    assert got["shape_mismatches"] == 1 and got["plain_steps"] == 1 and got["layers"] == ["Linear"]
    assert "K-FAC" in logged_warnings(caplog)


def test_a_kfac_run_records_its_fallbacks_in_the_result(monkeypatch, caplog):
    cfg = TrainConfig.from_dict(tiny(**{"optimizer.name": "kfac-sgd", "optimizer.kfac_update_every": 3}))
    clean = trainer_run.train(cfg, progress=False)
    assert "kfac_fallbacks" not in clean.final.extra  # a run that never fell back says nothing
    assert "K-FAC" not in logged_warnings(caplog)
    monkeypatch.setattr(torch.linalg, "eigh", _always_fails)
    result = trainer_run.train(cfg, progress=False)
    got = result.final.extra["kfac_fallbacks"]
    assert got["plain_steps"] == result.final.steps and len(got["layers"]) == 4  # 3 convs and the linear layer
    assert result.to_dict()["final"]["kfac_fallbacks"] == got  # in result.json
    assert record.result_attrs(result, None)["kfac_fallbacks"] == got  # in the trial's attributes
    assert "plain SGD" in record.note_text(1, result, "summary", None, False)  # and its note
    assert logged_warnings(caplog).count("K-FAC") == 1


# -- wall seconds --------------------------------------------------------------------------------
def _failing_wall_writes(monkeypatch, times: int):
    real, failed = optuna.Trial.set_user_attr, []

    def set_user_attr(self, key, value):
        if key == WALL_KEY and len(failed) < times:
            failed.append(key)
            raise optuna.exceptions.StorageInternalError("the database went away (simulated)")
        return real(self, key, value)

    monkeypatch.setattr(optuna.Trial, "set_user_attr", set_user_attr)
    return failed


def test_a_failed_wall_seconds_write_is_retried_once(tmp_path, scripted, monkeypatch):
    failed = _failing_wall_writes(monkeypatch, times=1)
    path = study_file(tmp_path, 2)
    assert main(["run", str(path)]) == 0
    assert failed and all(WALL_KEY in t.user_attrs for t in trials_of(path))


def test_wall_seconds_that_cannot_be_written_fail_the_run(tmp_path, scripted, monkeypatch, capsys):
    _failing_wall_writes(monkeypatch, times=1000)
    path = study_file(tmp_path, 4, budget=1000)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert "wall seconds" in err and "the database went away (simulated)" in err, err
    assert len(trials_of(path)) == 1  # the study stopped at the first trial it could not count


# -- a worker's warm-up --------------------------------------------------------------------------
def test_a_failed_warm_up_is_a_warning_with_its_cause(tmp_path, monkeypatch, caplog, scripted):
    from effsearch.search.run import runner
    from effsearch.search.study import studyfile

    calls = []

    def warm_up(cfg, data_root=None, train_fn=None):
        calls.append(cfg)
        raise RuntimeError("no kernel for this op (simulated)")

    monkeypatch.setattr(workers, "warm_up", warm_up)
    spec = studyfile.load(study_file(tmp_path, 2))
    runner.ensure_study(spec, storage.open_storage(spec))
    assert workers.work(spec, warm=True) == "done"
    said = logged_warnings(caplog)  # the worker's warnings, as logged
    assert calls and said.count("warm-up") == 1 and "RuntimeError: no kernel for this op (simulated)" in said, said


# -- required dependencies ---------------------------------------------------------------------
def test_a_missing_matplotlib_is_recorded_on_each_trial_and_printed_once(tmp_path, scripted, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # `import` raises ImportError
    path = study_file(tmp_path, 3)
    assert main(["run", str(path)]) == 0
    err = capsys.readouterr().err
    trials = trials_of(path)
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert all("matplotlib" in t.user_attrs["artifact_error"] for t in trials)
    assert err.count("import of matplotlib.figure halted") == 1, err  # printed once, not per trial


def test_a_missing_optuna_dashboard_is_an_error_not_a_skipped_note(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna_dashboard", None)
    with pytest.raises(ImportError):
        record.save_note(object(), "a note")


# -- FFCV's .beton folder ----------------------------------------------------------------------------
def test_an_unwritable_beton_folder_is_named_in_a_warning_printed_once(B, tmp_path, monkeypatch, caplog):
    """The .beton files go beside the dataset; where that cannot be written they go to the
    per-user cache, and the warning names the folder and why (it had been silent)."""
    from effsearch.trainer.data.splits import load_splits

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the data folder should be")
    cfg = TrainConfig.from_dict(tiny(**{"dataset.synthetic_size": 64}))
    splits = load_splits(cfg)
    first = B.ensure_betons(cfg, splits, data_root=blocker)
    again = B.ensure_betons(cfg, splits, data_root=blocker, force=True)
    assert first.folder.is_relative_to(tmp_path / "cache") and first.written
    assert str(blocker) in first.instead_of and again.instead_of == first.instead_of
    said = logged_warnings(caplog)
    assert said.count("cannot write the .beton files") == 1 and str(blocker) in said, said
    assert str(first.folder) in said
