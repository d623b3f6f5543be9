"""A study's cost in runs of its baseline and when its pick pays it back (search.cost), checked on
scripted trials whose wall seconds and times to target are known, and where the commands show it."""

import json
import math

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from effsearch.cli import main
from effsearch.search.results import best, cost
from effsearch.search.store.attrs import TUNE_COMPUTE_KEY
from effsearch.search.store.storage import open_url
from tests.support.fake_study import POINTS, add, config

# Wall seconds per trial (set-up, training, evaluation): the baseline's is the unit.
WALL = {0: 12.0, 1: 4.0, 2: 6.0, 3: 22.0, 4: 14.0, 5: 31.0}
PRUNED_WALL, FAILED_WALL = 3.0, 0.5
COMPUTE = sum(WALL.values()) + PRUNED_WALL + FAILED_WALL  # 92.5: every finished trial counts


@pytest.fixture
def storage_path(tmp_path):
    path = tmp_path / "s.journal"
    storage = open_url(str(path))
    study = optuna.create_study(study_name="paid", storage=storage, directions=["minimize", "maximize"])
    study.set_user_attr("objectives", ["time_to_accuracy", "final_accuracy"])
    study.set_user_attr("target_accuracy", 0.75)
    for n, (tta, acc) in POINTS.items():
        add(study, n, tta, acc, wall_seconds=WALL[n], **({"baseline": True} if n == 0 else {}))
    study.add_trial(
        create_trial(state=TrialState.PRUNED, user_attrs={"config": config(6).to_yaml(), "wall_seconds": PRUNED_WALL})
    )
    study.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"wall_seconds": FAILED_WALL}))
    return path


def study_of(path):
    return optuna.load_study(study_name="paid", storage=open_url(str(path)))


def test_the_cost_is_compute_in_baseline_runs_and_the_pick_pays_back_after_compute_over_saving(storage_path):
    c = best.cost_of(study_of(storage_path))  # the knee: trial 2 (4 s to target against the baseline's 10 s)
    assert c.compute == pytest.approx(COMPUTE)
    assert c.baseline_wall == 12.0 and c.baseline_runs == pytest.approx(COMPUTE / 12.0)
    assert (c.pick, c.baseline_tta, c.pick_tta) == (2, 10.0, 4.0)
    assert c.saving == pytest.approx(6.0) and c.break_even == pytest.approx(COMPUTE / 6.0)
    assert "pays for itself after 16 runs" in "\n".join(c.lines())  # ceil(92.5 / 6) = 16
    fastest = best.cost_of(study_of(storage_path), "fastest")  # trial 1: 2 s, saves 8 s a run
    assert (fastest.pick, fastest.saving, fastest.break_even) == (1, 8.0, pytest.approx(COMPUTE / 8.0))


def test_phase_1s_compute_counts_in_phase_2s_cost(storage_path):
    study = study_of(storage_path)
    study.set_user_attr(TUNE_COMPUTE_KEY, 100.0)
    c = best.cost_of(study)
    assert c.compute == pytest.approx(COMPUTE + 100.0)
    assert c.baseline_runs == pytest.approx((COMPUTE + 100.0) / 12.0)


def test_a_pick_no_faster_than_the_baseline_or_no_pick_pays_nothing_back(storage_path):
    study = study_of(storage_path)
    slowest = cost.of(study, study.trials[3], "most-accurate")  # trial 3: 20 s, slower than the baseline
    assert slowest.saving == pytest.approx(-10.0) and slowest.break_even is None
    assert "no faster to the target than the baseline" in "\n".join(slowest.lines())
    nothing = best.cost_of(study, "fastest-above:0.99")
    assert nothing.pick is None and nothing.break_even is None
    assert "no trial satisfies pick=fastest-above:0.99" in "\n".join(nothing.lines())  # as Python says it
    assert math.isclose(nothing.compute, COMPUTE)


def test_status_export_and_best_show_the_cost(storage_path, tmp_path, capsys):
    assert main(["status", "paid", "--storage", str(storage_path)]) == 0
    out = capsys.readouterr().out
    assert f"cost: {COMPUTE:.1f} s of compute = {COMPUTE / 12:.1f} runs of the baseline" in out
    assert "the knee pick (trial 2) reaches the target 6.0 s sooner a run" in out

    assert main(["export", "paid", "--storage", str(storage_path), "-o", str(tmp_path / "f.json")]) == 0
    doc = json.loads((tmp_path / "f.json").read_text())
    assert doc["cost"]["baseline_runs"] == pytest.approx(COMPUTE / 12) and doc["cost"]["pick"] == 2
    assert doc["cost"]["break_even"] == pytest.approx(COMPUTE / 6)

    assert (
        main(["best", "paid", "--storage", str(storage_path), "--pick", "fastest", "-o", str(tmp_path / "b.yaml")]) == 0
    )
    header = (tmp_path / "b.yaml").read_text()
    assert "the fastest pick (trial 1) reaches the target 8.0 s sooner a run" in header
    assert f"pays for itself after {math.ceil(COMPUTE / 8)} runs" in header
