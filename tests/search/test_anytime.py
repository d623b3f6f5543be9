"""A study's anytime curve (search.anytime) and `effsearch export --plot anytime`, on scripted
trials whose wall seconds, times to target and accuracies are known."""

import csv
import json

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from effsearch.cli import main
from effsearch.search.results import anytime
from effsearch.search.store.storage import open_url
from tests.support.fake_study import add, config

# The baseline takes 10 s of wall time (one baseline run) and reaches the target in 10 s at 0.95.
# trial: (time to target, final val accuracy, wall seconds), in the order they finish
TRIALS = [
    (10.0, 0.95, 10.0),  # 0, the baseline: 1.00x
    (4.0, 0.90, 5.0),  # 1: 2.5x but 5 points under: not within the point
    (8.0, 0.945, 10.0),  # 2: 1.25x, 0.5 points under: counts
    (None, 0.96, 20.0),  # 3: missed the target
    (2.0, 0.941, 5.0),
]  # 4: 5x, 0.9 points under: counts
PRUNED_WALL = 5.0  # a pruned trial finishes last: it costs compute and finds nothing


def one_phase(path):
    storage = open_url(str(path))
    study = optuna.create_study(study_name="plain", storage=storage, directions=["minimize", "maximize"])
    study.set_user_attr("objectives", ["time_to_accuracy", "final_accuracy"])
    study.set_user_attr("target_accuracy", 0.9)
    for n, (tta, acc, wall) in enumerate(TRIALS):
        add(study, n, tta, acc, wall_seconds=wall, **({"baseline": True} if n == 0 else {}))
    study.add_trial(
        create_trial(state=TrialState.PRUNED, user_attrs={"config": config(9).to_yaml(), "wall_seconds": PRUNED_WALL})
    )
    return study


def test_the_curve_is_the_best_speedup_within_a_point_against_compute_in_baseline_runs(tmp_path):
    c = anytime.curve(one_phase(tmp_path / "s.journal"))
    pts = c["points"]
    assert c["baseline_wall"] == 10.0 and c["phase1_runs"] is None
    assert [p["trial"] for p in pts] == [0, 1, 2, 3, 4, 5]
    assert [p["baseline_runs"] for p in pts] == [1.0, 1.5, 2.5, 4.5, 5.0, 5.5]
    # 2.5x at 5 points under never counts; the miss and the pruned trial find nothing.
    assert [p["best_speedup"] for p in pts] == [1.0, 1.0, 1.25, 1.25, 5.0, 5.0]
    assert [p["best_trial"] for p in pts] == [0, 0, 2, 2, 4, 4]
    assert anytime.first_at(c, 1.2) == 2.5 and anytime.first_at(c, 3.0) == 5.0 and anytime.first_at(c, 6) is None
    # Two points instead of one: trial 4 no longer counts, trial 2 still does.
    wide = anytime.curve(one_phase(tmp_path / "t.journal"), within=0.005)
    assert wide["points"][-1]["best_speedup"] == 1.25


def two_phases(path):
    """Phase 1 (on a subset, its own baseline and target) then phase 2 (baseline + a pick x 2 seeds)."""
    storage = open_url(str(path))
    tune = optuna.create_study(study_name="s-tune", storage=storage, directions=["minimize", "maximize"])
    study = optuna.create_study(study_name="s", storage=storage, directions=["minimize", "maximize"])
    for s in (tune, study):
        s.set_user_attr("objectives", ["time_to_accuracy", "final_accuracy"])
    # phase 1: baseline 4 s to target at 0.80 (wall 4 s), a 2x trial within the point, a pruned one
    add(tune, 0, 4.0, 0.80, wall_seconds=4.0, baseline=True)
    add(tune, 1, 2.0, 0.795, wall_seconds=2.0)
    tune.add_trial(create_trial(state=TrialState.PRUNED, user_attrs={"wall_seconds": 1.0}))
    study.set_user_attr("tune_study", "s-tune")
    study.set_user_attr("tuning", {"seeds": 2})
    add(study, 0, 20.0, 0.90, wall_seconds=20.0, baseline=True)
    # the pick's two seeds: 8 s and 12 s to target (mean 10 s: 2x), both within the point
    add(study, 1, 8.0, 0.895, wall_seconds=10.0, tune_trial=1, confirm_seed=0, tune_values=[2.0, 0.795])
    add(study, 2, 12.0, 0.897, wall_seconds=14.0, tune_trial=1, confirm_seed=1, tune_values=[2.0, 0.795])
    return study, tune


def test_phase_1s_compute_comes_first_and_a_pick_counts_once_all_its_seeds_ran(tmp_path):
    study, tune = two_phases(tmp_path / "s.journal")
    c = anytime.curve(study, tune)
    pts = c["points"]
    assert [(p["phase"], p["trial"]) for p in pts] == [
        ("tune", 0),
        ("tune", 1),
        ("tune", 2),
        ("confirm", 0),
        ("confirm", 1),
        ("confirm", 2),
    ]
    # the unit is phase 2's baseline (20 s); phase 1 spent 7 s = 0.35 runs of it
    assert [p["compute"] for p in pts] == [4.0, 6.0, 7.0, 27.0, 37.0, 51.0]
    assert c["phase1_runs"] == pytest.approx(0.35) and pts[-1]["baseline_runs"] == pytest.approx(2.55)
    # phase 1's own speed-ups are what the search saw, not a full-data answer
    assert [p["best_speedup"] for p in pts[:3]] == [None, None, None]
    assert [p["tune_speedup"] for p in pts[:3]] == [1.0, 2.0, 2.0]
    # one seed of the pick (2.5x alone) is not the recipe: it counts at its seeds' mean, 2x
    assert [p["best_speedup"] for p in pts[3:]] == [1.0, 1.0, 2.0]
    assert pts[-1]["best_trial"] == 1


def test_export_draws_the_anytime_curve_and_writes_its_points(tmp_path, capsys):
    path = tmp_path / "s.journal"
    two_phases(path)
    base = ["export", "s", "--storage", str(path), "--plot", "anytime", "-o"]
    assert main(base + [str(tmp_path / "curve.png")]) == 0
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "6 points of the anytime curve" in capsys.readouterr().err
    assert main(base + [str(tmp_path / "curve.html")]) == 0
    page = (tmp_path / "curve.html").read_text()
    assert "anytime-curve" in page and "Plotly.newPlot" in page and 'src="http' not in page
    assert main(base + [str(tmp_path / "curve.csv")]) == 0
    with open(tmp_path / "curve.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["phase"] for r in rows] == ["tune"] * 3 + ["confirm"] * 3 and rows[-1]["best_speedup"] == "2.0"
    # the JSON export of the front carries the curve, phase 1 included (the CLI opens phase 1's study)
    assert main(["export", "s", "--storage", str(path), "-o", str(tmp_path / "front.json")]) == 0
    doc = json.loads((tmp_path / "front.json").read_text())
    assert len(doc["anytime"]["points"]) == 6 and doc["anytime"]["phase1_runs"] == pytest.approx(0.35)
