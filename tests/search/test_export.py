"""`effsearch export`: the front of a study made of given values (tests/support/fake_study.py)."""

import csv
import json
import struct

import optuna
import pytest
import yaml

from effsearch.cli import main
from effsearch.search import pareto
from effsearch.search.results import export, plots
from effsearch.search.store.storage import open_url
from tests.support.fake_study import FRONT, POINTS


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
    assert {
        "time_to_accuracy",
        "final_accuracy",
        "test_accuracy",
        "speedup",
        "reached_target",
        "baseline",
        "summary",
        "param.optimizer.lr",
    } <= set(rows[0]) and "on_front" not in rows[0]
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


@pytest.mark.parametrize("extra", [[], ["--all"], ["--plot", "anytime"]])
def test_a_study_with_nothing_finished_exports_a_header_and_says_so(storage_path, tmp_path, capsys, extra):
    # Its baseline still running: a CSV a script reads must still name its columns.
    storage = open_url(str(tmp_path / "s.journal"))
    study = optuna.create_study(study_name="early", storage=storage, directions=["minimize", "maximize"])
    study.set_user_attr("objectives", ["time_to_accuracy", "final_accuracy"])
    study.ask()
    out = tmp_path / "e.csv"
    assert main(["export", "early", "--storage", str(tmp_path / "s.journal"), "-o", str(out), *extra]) == 0
    assert "(none yet: the file holds its header;" in capsys.readouterr().err
    with open(out, newline="") as f:
        header = next(csv.reader(f))
    assert header[0] == "trial" and not read_csv(out)
    if not extra:  # a picture says it has no point, not that it holds a header
        assert main(["export", "early", "--storage", str(tmp_path / "s.journal"), "-o", str(tmp_path / "e.png")]) == 0
        assert "(none yet: the plot has no point;" in capsys.readouterr().err
    if extra != ["--plot", "anytime"]:
        full = tmp_path / "full.csv"
        assert export_(storage_path, full, *extra) == 0  # the same columns as a study with rows
        with open(full, newline="") as f:
            assert header == [c for c in next(csv.reader(f)) if not c.startswith("param.")]


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


def test_bad_export_input_an_unknown_study_and_a_missing_storage_exit_2(storage_path, tmp_path, capsys):
    assert export_(storage_path, tmp_path / "front.txt") == 2
    assert "--format" in capsys.readouterr().err and not (tmp_path / "front.txt").exists()
    assert export_(storage_path, tmp_path / "front.txt", "--format", "csv") == 0  # --format wins
    assert int(read_csv(tmp_path / "front.txt")[0]["trial"]) == FRONT[0]
    with pytest.raises(SystemExit) as e:
        export_(storage_path, tmp_path / "x.csv", "--format", "xml")
    assert e.value.code == 2
    assert main(["export", "nope", "--storage", str(storage_path), "-o", str(tmp_path / "x.csv")]) == 2
    assert "studies there: fake, misses" in capsys.readouterr().err
    assert main(["export", "fake", "--storage", str(tmp_path / "none.journal"), "-o", str(tmp_path / "x.csv")]) == 2
    assert "no study storage" in capsys.readouterr().err and not (tmp_path / "none.journal").exists()


@pytest.mark.parametrize("fmt", ["csv", "json", "html"])
def test_a_write_that_fails_midway_leaves_the_earlier_export_whole(storage_path, tmp_path, monkeypatch, capsys, fmt):
    """A full disk mid-export: exit 2 naming -o, the earlier export as it was, no part file left."""
    out = tmp_path / f"front.{fmt}"
    assert export_(storage_path, out) == 0
    good = out.read_bytes()
    real = export._write

    def full_disk(doc, path, fmt, plot):
        real(doc, path, fmt, plot)
        path.write_bytes(path.read_bytes()[:10])  # what a full disk leaves
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "_write", full_disk)
    capsys.readouterr()
    assert export_(storage_path, out) == 2
    assert "-o: cannot write" in capsys.readouterr().err
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir() if "front" in p.name) == [out.name]
