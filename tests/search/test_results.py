"""Typed results, the one speed-up, report errors named. Which module holds what (one speed-up, one
pruning package, one storage opener, Optuna's private parts in storage.py only) is
tests/meta/test_architecture.py's, on the AST."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from effsearch.trainer.result import EvalPoint, Final, RunResult, clean, speedup, time_to_target

# result.json as effsearch wrote it before the types (history and final as plain dicts),
# with a key this effsearch does not know and a NaN written as null.
TODAY = {
    "status": "completed",
    "config": {"epochs": 2},
    "history": [
        {
            "epoch": 1.0,
            "samples_seen": 320,
            "train_seconds": 1.5,
            "val_accuracy": 0.6,
            "val_loss": 1.1,
            "train_loss": 1.3,
            "subset_size": 96,
            "selections": 1,
        },
        {
            "epoch": 2.0,
            "samples_seen": 640,
            "train_seconds": 3.0,
            "val_accuracy": 0.8,
            "val_loss": None,
            "train_loss": 0.9,
            "subset_size": 96,
            "selections": 2,
            "someday": "kept",
        },
    ],
    "final": {
        "setup_seconds": 0.2,
        "train_seconds": 3.0,
        "eval_seconds": 0.1,
        "compile_seconds": 0.0,
        "steps": 20,
        "selection_seconds": 0.4,
        "val_accuracy": 0.8,
        "val_loss": 0.7,
        "final_eval_seconds": 0.05,
        "sparsity": 0.0,
        "nonzero_params": 100,
        "nonzero_param_bytes": 400,
        "params": 100,
        "data_seconds": 0.3,
        "a_future_key": 7,
    },
    "target_accuracy": 0.75,
    "time_to_target": 3.0,
    "reason": "",
    "device": "cpu (x86_64, 2 threads)",
    "versions": {"effsearch": "0.1.0"},
}


def test_todays_result_json_loads_typed_and_saves_the_same(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(TODAY))
    r = RunResult.load(path)
    assert isinstance(r.history[0], EvalPoint) and isinstance(r.final, Final)
    assert r.history[1].val_accuracy == 0.8 and r.history[1].selections == 2 and r.history[1].val_loss is None
    assert r.final.steps == 20 and r.final.test_accuracy is None  # not recorded: None, not a KeyError
    assert r.history[1].extra == {"someday": "kept"} and r.final.extra == {"a_future_key": 7}
    r.save(tmp_path / "again.json")
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["final"] == TODAY["final"]
    # A None of today's file is absent after the round trip; every other key is kept as it was.
    assert again["history"][0] == TODAY["history"][0]
    assert again["history"][1] == {k: v for k, v in TODAY["history"][1].items() if v is not None}
    assert {k: v for k, v in again.items() if k not in ("history", "final")} == {
        k: v for k, v in TODAY.items() if k not in ("history", "final")
    }


def test_non_finite_numbers_are_written_as_null():
    r = RunResult(
        status="diverged",
        config={},
        history=[EvalPoint(epoch=1, train_seconds=1.0, val_accuracy=0.1, val_loss=math.inf)],
        final=Final(val_accuracy=0.1, val_loss=math.nan),
    )
    d = r.to_dict()
    assert d["history"][0]["val_loss"] is None and d["final"]["val_loss"] is None
    json.dumps(d, allow_nan=False)
    assert clean({1: (1.0, math.nan)}) == {"1": [1.0, None]}


def test_final_set_keeps_unknown_measurements():
    f = Final()
    f.set(train_seconds=2.0, steps=3, something_new=1)
    assert f.train_seconds == 2.0 and f.extra == {"something_new": 1}
    assert f.to_dict() == {"train_seconds": 2.0, "steps": 3, "something_new": 1}


def test_time_to_target_reads_points_and_stored_dicts():
    points = [
        EvalPoint(epoch=1, train_seconds=1.0, val_accuracy=0.5),
        EvalPoint(epoch=2, train_seconds=2.0, val_accuracy=0.9),
    ]
    assert time_to_target(points, 0.8) == 2.0
    assert time_to_target([p.to_dict() for p in points], 0.8) == 2.0
    assert time_to_target(points, 0.8, final_value=0.7) is None


def test_one_speedup_function():
    assert speedup(10.0, 4.0) == 2.5
    assert speedup(None, 4.0) is None and speedup(10.0, None) is None and speedup(0.0, 4.0) is None
    from effsearch.search.store import queries

    trial = SimpleNamespace(user_attrs={"time_to_target": 5.0})
    base = SimpleNamespace(user_attrs={"time_to_target": 10.0})
    tta = queries.seconds_to_target
    assert speedup(tta(base), tta(trial)) == 2.0 and speedup(tta(None), tta(trial)) is None
    # and no second one (tests/meta/test_architecture.py): a trial's speed-up is this function of the two times


def test_a_run_at_exactly_the_target_reached_it():
    points = [
        EvalPoint(epoch=1, train_seconds=1.0, val_accuracy=0.5),
        EvalPoint(epoch=2, train_seconds=2.0, val_accuracy=0.75),
    ]
    assert time_to_target(points, 0.75) == 2.0
    assert time_to_target(points, 0.75, final_value=0.75) == 2.0
    assert time_to_target(points + [{"epoch": 3, "train_seconds": 3.0, "val_accuracy": None}], 0.9) is None


def test_save_writes_readable_json_into_new_folders_and_returns_its_path(tmp_path):
    r = RunResult(status="completed", config={"epochs": 1}, final={"train_seconds": 2.0})
    path = tmp_path / "a" / "b" / "result.json"
    assert r.save(path) == path
    text = path.read_text()
    assert text.startswith('{\n  "status": "completed"')  # indented: people read result.json
    assert RunResult.load(path).to_dict() == r.to_dict()
    assert sorted(p.name for p in path.parent.iterdir()) == ["result.json"]


def test_the_temporary_file_sits_beside_result_json_and_never_stays(tmp_path, monkeypatch):
    """Written beside it (a rename within one folder is atomic), hidden, and removed when the
    rename fails; the failure is the one raised."""
    from effsearch.trainer import result as R

    r = RunResult(status="completed", config={})
    moved = []
    real_replace = R.os.replace
    monkeypatch.setattr(R.os, "replace", lambda src, dst: (moved.append(Path(src)), real_replace(src, dst)))
    r.save(tmp_path / "result.json")
    assert moved[0].parent == tmp_path and moved[0].name.startswith(".result-") and moved[0].suffix == ".json"

    def refuse(src, dst):
        raise PermissionError("read-only")

    monkeypatch.setattr(R.os, "replace", refuse)
    with pytest.raises(PermissionError, match="read-only"):
        r.save(tmp_path / "other" / "result.json")
    assert list((tmp_path / "other").iterdir()) == []


def test_a_ctrl_c_inside_the_write_writes_the_file_then_interrupts(tmp_path, monkeypatch):
    from effsearch.trainer import result as R

    r = RunResult(status="interrupted", config={})
    calls = []
    real_replace = R.os.replace

    def interrupted_once(src, dst):
        calls.append(src)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(R.os, "replace", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        r.save(tmp_path / "result.json")
    assert len(calls) == 2 and RunResult.load(tmp_path / "result.json").status == "interrupted"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_versions_name_what_ran():
    import platform
    from importlib.metadata import PackageNotFoundError, version

    from effsearch.trainer.result import versions

    v = versions()
    assert v["python"] == platform.python_version()
    for pkg in ("effsearch", "torch", "torchvision", "mosaicml", "cords", "optuna", "ffcv"):
        try:
            assert v[pkg] == version(pkg)
        except PackageNotFoundError:  # ffcv is an extra: absent, not recorded
            assert pkg not in v
    assert v["torch"] and v["optuna"] and v["mosaicml"]
    assert set(v) <= {"effsearch", "torch", "torchvision", "mosaicml", "cords", "optuna", "ffcv", "python"}


class _Study:
    study_name = "s"

    def __init__(self, error):
        self.error = error

    def get_trials(self, *args, **kwargs):  # what queries.front reads (its own front: seed means)
        raise self.error


def test_the_front_names_a_storage_error_and_lets_bugs_raise(caplog):
    from sqlalchemy.exc import OperationalError

    from effsearch.search.store import queries

    assert queries.front(_Study(OperationalError("SELECT", {}, Exception("server closed the connection")))) == []
    said = [r.getMessage() for r in caplog.records if r.name == "effsearch.search.store.queries"]
    assert len(said) == 1 and "cannot read the Pareto front of study 's'" in said[0], said
    assert "server closed the connection" in said[0] and caplog.records[-1].levelname == "WARNING"
    with pytest.raises(TypeError):
        queries.front(_Study(TypeError("a bug")))


def test_result_json_has_the_mode_a_new_file_gets(tmp_path):
    """Readable as any file the user writes (umask 022: 0644), not mkstemp's 0600."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        path = RunResult(status="completed", config={}).save(tmp_path / "result.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_train_on_a_full_disk_shows_what_the_run_measured_and_exits_1(tmp_path, monkeypatch, capsys):
    """result.json cannot be written: one line naming --out, the figures on stdout, no traceback."""
    import yaml

    from effsearch.cli import main
    from effsearch.trainer import result as result_module
    from tests.support.helpers import tiny

    def full_disk(self, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(result_module.RunResult, "save", full_disk)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(tiny()))
    assert main(["train", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert "val accuracy" in out and "status: completed" in out
    assert f"--out: cannot write {tmp_path / 'run' / 'result.json'}: No space left on device" in err
    assert "Traceback" not in err
