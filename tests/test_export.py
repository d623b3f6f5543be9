"""`effsearch export`, `best` and `dashboard` (its arguments; tests/test_dashboard_e2e.py
serves it). Most tests read a study made of given values, so that the front and
every pick are known; the round trip through `effsearch train` uses a real one."""

import csv
import json
import struct

import optuna
import pytest
import yaml
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from effsearch.cli import main
from effsearch.config import TrainConfig
from effsearch.search import best, dashboard, export, pareto, plots
from effsearch.search.storage import open_url
from effsearch.search.studyfile import load as load_study_file
from effsearch.config.machine import Machine
from tests.conftest import tiny
from tests.tiny_study import built_study

# trial: (time to target, None for a miss; final val accuracy)
POINTS = {0: (10.0, 0.95),  # the baseline, on the front
          1: (2.0, 0.80), 2: (4.0, 0.93), 3: (20.0, 0.96),  # the rest of the front; 2 is the knee
          4: (12.0, 0.90),  # dominated by 0
          5: (None, 0.70)}  # missed the target (0.75)
FRONT = [1, 2, 0, 3]  # fastest first


def config(n: int) -> TrainConfig:
    return TrainConfig.from_dict(tiny(**{"optimizer.lr": 0.01 * (n + 1)}))


def add(study, n, tta, acc, **attrs):
    # As the runner stores them: a miss has its train seconds (30) and is infeasible.
    study.add_trial(create_trial(
        values=[tta if tta is not None else 30.0, acc],
        system_attrs={"constraints": [0.0 if tta is not None else 0.05]},
        params={"optimizer.lr": 0.01 * (n + 1)}, distributions={"optimizer.lr": FloatDistribution(0.001, 1.0)},
        user_attrs={"config": config(n).to_yaml(), "reached_target": tta is not None, "time_to_target": tta,
                    "val_accuracy": acc, "test_accuracy": acc - 0.01, "speedup": 10.0 / tta if tta else None,
                    "status": "completed", "device": "cpu (test)",
                    "versions": {"effsearch": "0.1.0", "torch": "2.7.0", "mosaicml": "0.32.1"}, **attrs}))


@pytest.fixture(scope="module")
def storage_path(tmp_path_factory):
    """A journal with study 'fake' (POINTS, a pruned and a failed trial) and 'misses' (no hit)."""
    path = tmp_path_factory.mktemp("fake") / "fake.journal"
    storage = open_url(str(path))
    for name in ("fake", "misses"):
        study = optuna.create_study(study_name=name, storage=storage, directions=["minimize", "maximize"])
        study.set_user_attr("objectives", ["time_to_accuracy", "final_accuracy"])
        study.set_user_attr("target_accuracy", 0.75)
    fake = optuna.load_study(study_name="fake", storage=storage)
    for n, (tta, acc) in POINTS.items():
        add(fake, n, tta, acc, **({"baseline": True} if n == 0 else {}))
    fake.add_trial(create_trial(state=TrialState.PRUNED, user_attrs={"config": config(6).to_yaml()}))
    fake.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"status": "failed", "reason": "test"}))
    misses = optuna.load_study(study_name="misses", storage=storage)
    add(misses, 0, None, 0.6, baseline=True)
    add(misses, 1, None, 0.7)
    return path


def export_(storage_path, out, *extra) -> int:
    return main(["export", "fake", "--storage", str(storage_path), "-o", str(out), *extra])


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# -- export ------------------------------------------------------------------------

def test_the_front_as_csv_has_every_column_and_only_front_trials(storage_path, tmp_path):
    assert export_(storage_path, tmp_path / "front.csv") == 0
    rows = read_csv(tmp_path / "front.csv")
    assert [int(r["trial"]) for r in rows] == FRONT
    assert {"time_to_accuracy", "final_accuracy", "test_accuracy", "speedup", "reached_target", "baseline",
            "summary", "param.optimizer.lr"} <= set(rows[0]) and "on_front" not in rows[0]
    r = {int(r["trial"]): r for r in rows}
    assert float(r[2]["time_to_accuracy"]) == 4.0 and float(r[2]["speedup"]) == 2.5
    assert r[0]["baseline"] == "True" and r[1]["baseline"] == "False"
    assert "sgd lr 0.03" in r[2]["summary"] and float(r[2]["param.optimizer.lr"]) == pytest.approx(0.03)
    points = [(float(x["time_to_accuracy"]), -float(x["final_accuracy"])) for x in rows]
    assert not any(pareto.dominates(p, q) for p in points for q in points)


def test_all_adds_the_dominated_trials_with_on_front(storage_path, tmp_path):
    assert export_(storage_path, tmp_path / "all.csv", "--all") == 0
    rows = {int(r["trial"]): r for r in read_csv(tmp_path / "all.csv")}
    assert set(rows) == set(POINTS)  # complete trials only: no pruned, no failed
    assert {n for n, r in rows.items() if r["on_front"] == "True"} == set(FRONT)
    points = {n: (float(r["time_to_accuracy"]), -float(r["final_accuracy"])) for n, r in rows.items() if n != 5}
    assert any(pareto.dominates(points[f], points[4]) for f in FRONT)  # a dominated row is dominated by the front
    # A miss has no time to target (the study stores its train seconds; it is infeasible, off the front).
    assert rows[5]["reached_target"] == "False" and rows[5]["time_to_accuracy"] == ""


def test_json_and_yaml_hold_the_study_and_the_same_rows(storage_path, tmp_path):
    assert export_(storage_path, tmp_path / "front.json") == 0
    assert export_(storage_path, tmp_path / "all.yml", "--all") == 0  # the format from the suffix
    doc = json.loads((tmp_path / "front.json").read_text())
    assert doc["study"] == "fake" and doc["baseline_trial"] == 0 and doc["objectives"][0] == "time_to_accuracy"
    assert [r["trial"] for r in doc["rows"]] == FRONT and doc["rows"][0]["params"] == {"optimizer.lr": 0.02}
    all_ = yaml.safe_load((tmp_path / "all.yml").read_text())
    assert len(all_["rows"]) == len(POINTS) and all_["rows"][5]["on_front"] is False
    assert all_["rows"][5]["time_to_target"] is None and all_["rows"][5]["speedup"] is None


def test_html_is_one_offline_page_with_the_plot_and_the_table(storage_path, tmp_path):
    assert export_(storage_path, tmp_path / "all.html", "--all") == 0
    text = (tmp_path / "all.html").read_text()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert "Plotly.newPlot" in text and "plotly.js" in text and 'src="http' not in text
    assert "1 trial missed the target 0.75 (not shown)" in text and "<table>" in text
    assert text.count("<tr>") == 1 + len(POINTS)


def test_the_plot_leaves_misses_off_and_marks_the_baseline(storage_path):
    study = optuna.load_study(study_name="fake", storage=open_url(str(storage_path)))
    s = plots.series(export.document(study, "x", all_trials=True))
    assert [r["trial"] for r in s["front"]] == FRONT and [r["trial"] for r in s["dominated"]] == [4]
    assert [r["trial"] for r in s["missed"]] == [5] and s["baseline"]["trial"] == 0
    assert all(r["reached_target"] for r in s["front"] + s["dominated"])
    # Front only: the baseline is drawn even where it is not a row.
    doc = export.document(study, "x", all_trials=False)
    doc["rows"] = [r for r in doc["rows"] if r["trial"] != 0]
    assert plots.series(doc)["baseline"]["trial"] == 0


@pytest.mark.parametrize("extra", [[], ["--all"]])
def test_png_is_a_png(storage_path, tmp_path, extra):
    out = tmp_path / "front.png"
    assert export_(storage_path, out, *extra) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 400 and height > 300


def test_bad_export_input_exits_2_and_a_missing_study_exits_1(storage_path, tmp_path, capsys):
    assert export_(storage_path, tmp_path / "front.txt") == 2
    assert "--format" in capsys.readouterr().err and not (tmp_path / "front.txt").exists()
    assert export_(storage_path, tmp_path / "front.txt", "--format", "csv") == 0  # --format wins
    assert int(read_csv(tmp_path / "front.txt")[0]["trial"]) == FRONT[0]
    with pytest.raises(SystemExit) as e:
        export_(storage_path, tmp_path / "x.csv", "--format", "xml")
    assert e.value.code == 2
    assert main(["export", "nope", "--storage", str(storage_path), "-o", str(tmp_path / "x.csv")]) == 1
    assert "studies there: fake, misses" in capsys.readouterr().err
    assert main(["export", "fake", "--storage", str(tmp_path / "none.journal"), "-o", str(tmp_path / "x.csv")]) == 1
    assert "no study storage" in capsys.readouterr().err and not (tmp_path / "none.journal").exists()


# -- best --------------------------------------------------------------------------

def best_(storage_path, out, pick, study="fake") -> int:
    return main(["best", study, "--storage", str(storage_path), "--pick", pick, "-o", str(out)])


@pytest.mark.parametrize("pick,trial", [("knee", 2), ("fastest", 1), ("most-accurate", 3),
                                        ("fastest-above:0.9", 2), ("fastest-above:0.94", 0)])
def test_each_pick_writes_that_trial_s_config(storage_path, tmp_path, pick, trial):
    out = tmp_path / "best.yaml"
    assert best_(storage_path, out, pick) == 0
    assert TrainConfig.from_yaml(out).hash() == config(trial).hash()
    text = out.read_text()
    head = text[:text.index("\ndataset:")].splitlines()
    assert all(line.startswith("#") for line in head)
    head = "\n".join(head)
    assert f"--pick {pick}: trial {trial} of study 'fake'" in head and str(storage_path) in head
    assert f"test accuracy {POINTS[trial][1] - 0.01:.4f}" in head and "torch 2.7.0" in head
    assert "mosaicml) 0.32.1" in head and "exported 20" in head


def test_only_trials_that_reached_the_target_count(storage_path, tmp_path, capsys):
    assert best_(storage_path, tmp_path / "a.yaml", "fastest-above:0.999") == 1
    assert "no trial of study 'fake' satisfies --pick fastest-above:0.999" in capsys.readouterr().err
    for pick in ("fastest", "knee", "fastest-above:0.5"):
        assert best_(storage_path, tmp_path / "a.yaml", pick, study="misses") == 1
    assert not (tmp_path / "a.yaml").exists()
    assert best_(storage_path, tmp_path / "b.yaml", "most-accurate", study="misses") == 0
    assert TrainConfig.from_yaml(tmp_path / "b.yaml").hash() == config(1).hash()


@pytest.mark.parametrize("pick", ["slowest", "fastest-above", "fastest-above:", "fastest-above:x",
                                  "fastest-above:95", "fastest-above:0", "Knee"])
def test_a_bad_pick_exits_2_before_the_study_is_opened(tmp_path, capsys, pick):
    assert best_(tmp_path / "none.journal", tmp_path / "b.yaml", pick, study="nope") == 2
    err = capsys.readouterr().err
    assert "--pick" in err and "fastest-above:0.95" in err and "Traceback" not in err


def test_an_unknown_study_lists_the_studies_there(storage_path, tmp_path, capsys):
    assert best_(storage_path, tmp_path / "b.yaml", "knee", study="nope") == 1
    err = capsys.readouterr().err
    assert "no study 'nope'" in err and "(studies there: fake, misses)" in err
    assert not (tmp_path / "b.yaml").exists()


def test_the_knee_is_farthest_above_the_line_between_the_ends():
    assert best.knee([(1, 0.5), (2, 0.9), (10, 0.95)]) == 1
    assert best.knee([(1, 0.5), (9, 0.6), (10, 0.95)]) == 0  # a convex front: no knee, nearest the ideal
    assert best.knee([(1, 0.5), (2, 0.6)]) == 0  # two ends: the faster
    assert best.knee([(3, 0.9)]) == 0


def test_the_header_hides_a_password(storage_path):
    study = optuna.load_study(study_name="fake", storage=open_url(str(storage_path)))
    text = best.header(study, "postgresql://me:secret@db/x", study.trials[2], "knee", "b.yaml")
    assert "secret" not in text and "postgresql://me:***@db/x" in text


def test_best_yaml_trains_as_it_is(tmp_path_factory, tmp_path):
    """The round trip on a real study: `effsearch train best.yaml` trains the trial's config."""
    path = built_study(tmp_path_factory)
    assert main(["best", str(path), "--pick", "most-accurate", "-o", str(tmp_path / "best.yaml")]) == 0
    study = optuna.load_study(study_name="tiny", storage=open_url(str(path.with_suffix(".journal"))))
    trial = best.pick(study, "most-accurate")
    trained = TrainConfig.from_dict(yaml.safe_load(trial.user_attrs["config"]))
    assert TrainConfig.from_yaml(tmp_path / "best.yaml").hash() == trained.hash()
    assert main(["train", str(tmp_path / "best.yaml"), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert TrainConfig.from_dict(result["config"]).hash() == trained.hash()


# -- dashboard arguments ----------------------------------------------------------

@pytest.fixture
def served(monkeypatch):
    import optuna_dashboard

    calls = []
    monkeypatch.setattr(optuna_dashboard, "run_server", lambda storage, **kw: calls.append((storage, kw)))
    return calls


def test_dashboard_on_a_study_file_uses_its_storage_and_artifacts(tmp_path_factory, served, capsys):
    path = built_study(tmp_path_factory)
    assert main(["dashboard", str(path)]) == 0
    (storage, kw), = served
    assert kw["host"] == "127.0.0.1" and kw["port"] == 8080
    assert kw["artifact_store"]._base_path == path.with_suffix(".artifacts")
    assert optuna.get_all_study_names(storage) == ["tiny"]
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8080/dashboard/studies/0" in out and str(path.with_suffix(".artifacts")) in out


def test_dashboard_on_a_name_or_a_storage(storage_path, tmp_path, served, capsys):
    art = tmp_path / "art"
    art.mkdir()
    assert main(["dashboard", "misses", "--storage", str(storage_path), "--artifact-dir", str(art),
                 "--host", "0.0.0.0", "--port", "9000"]) == 0
    assert served[-1][1]["artifact_store"]._base_path == art and served[-1][1]["host"] == "0.0.0.0"
    out = capsys.readouterr().out
    assert "http://0.0.0.0:9000/dashboard/studies/1" in out and "anyone who reaches this port" in out
    assert main(["dashboard", str(storage_path)]) == 0  # every study in it; no artifact folder there
    assert served[-1][1]["artifact_store"] is None
    assert "http://127.0.0.1:8080/dashboard/\n" in capsys.readouterr().out


@pytest.mark.parametrize("args,code,message", [
    (["nope", "--storage", "{s}"], 1, "studies there: fake, misses"),
    (["nope"], 2, "neither a study file nor a study name"),
    (["fake", "--storage", "{s}", "--port", "0"], 2, "--port: must be in [1, 65535]"),
    (["{s}", "--storage", "{s}"], 2, "is already a storage"),
    (["fake", "--storage", "{s}", "--artifact-dir", "/no/such/dir"], 2, "--artifact-dir: no such folder"),
    (["fake", "--storage", "{d}/none.journal"], 1, "no study storage"),
])
def test_dashboard_bad_arguments(storage_path, served, capsys, args, code, message):
    assert main(["dashboard"] + [a.format(s=storage_path, d=storage_path.parent) for a in args]) == code
    assert message in capsys.readouterr().err and not served


@pytest.mark.timeout(60)
def test_dashboard_on_a_taken_port_exits_1(storage_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["dashboard", "fake", "--storage", str(storage_path), "--port", str(port)]) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_dashboard_finds_the_artifacts_where_the_runner_puts_them(tmp_path):
    cases = [({}, None), ({"artifacts": "elsewhere"}, None), ({}, "sqlite:///{d}/s.db"), ({}, "{d}/j.journal")]
    for extra, storage in cases:
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump({"name": "s", "base": tiny(), "n_trials": 1, **extra}))
        storage = storage.format(d=tmp_path) if storage else None
        spec = load_study_file(path, storage=storage, machine=Machine())  # a CPU: no detection (seconds)
        assert dashboard.study_artifacts(path, spec.storage) == spec.artifacts, (extra, storage)
