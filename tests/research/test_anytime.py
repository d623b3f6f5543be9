"""The anytime yardstick (research/anytime): the curve of a search, the mean over seeds, and a
variant replayed on a world small enough to follow by hand."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from research.anytime.curve import Event, Search, summarise, table
from research.replay.run import N_GRID, Run

pytestmark = pytest.mark.research


def test_the_curve_is_the_best_so_far_and_over_the_recipe_divides_by_the_best_recipe():
    s = Search(
        [
            Event(1.0, 1.0, "baseline"),
            Event(2.0, 1.5, "recipe:small-batch"),
            Event(3.0, None, "search"),  # missed the point: no speed-up
            Event(6.0, 1.2, "search"),  # slower than the recipe: the best stays the recipe
            Event(12.0, 3.0, "search"),
        ],
        recipe=1.5,
    )
    assert s.best_at(0.5) == (1.0, None)
    assert s.best_at(5.0) == (1.5, "recipe:small-batch")
    assert s.best_at(10.0) == (1.5, "recipe:small-batch")
    assert s.best_at(20.0) == (3.0, "search")
    r = summarise("v", [s, Search([Event(1.0, 1.0, "baseline")], recipe=0.5)])
    assert r.base[5.0] == pytest.approx((1.5 + 1.0) / 2)
    assert r.recipe[20.0] == pytest.approx((3.0 / 1.5 + 1.0 / 1.0) / 2)  # no recipe beats the baseline: over 1.0
    assert r.proposed[20.0] == pytest.approx(0.5)
    assert r.proposed[5.0] == 0.0
    assert "| v | 2 | 1.25 |" in table([r])


def _run(acc: list[float], seconds: float = 9.0) -> Run:
    t = [seconds * (k + 1) / N_GRID for k in range(N_GRID)]
    return Run(t, acc, acc[-1], overhead=0.5, eval_s=0.1, final_eval=0.1)


BASE = _run([0.5, 0.8, 0.9, 0.95, 0.96, 0.97, 0.975, 0.98, 0.98])  # final 0.98: within a point is 0.97
FAST = _run([0.9, 0.97, 0.975, 0.98, 0.98, 0.98, 0.98, 0.98, 0.98])  # 0.97 at its second ninth: 3x
RECIPE = _run([0.8, 0.9, 0.96, 0.97, 0.975, 0.975, 0.975, 0.975, 0.975])  # 0.97 at its fourth: 1.5x


def _task():
    from effsearch.search.study import studyfile
    from research.anytime import replay
    from research.replay.world import World

    spec = studyfile.from_mapping(
        {
            "name": "t",
            "base": {"dataset": {"name": "digits"}, "epochs": 2, "target_accuracy": 0.95},
            "space": {"include": ["optimizer.lr"]},
            "warm_start": ["recipe:small-batch"],
        },
        "t.yaml",
    )
    recipe_key = json.dumps(spec.space.encode(spec.warm_start[0][1]), sort_keys=True, default=str)

    def surrogate(x, key):
        return RECIPE if key == recipe_key else FAST

    table = SimpleNamespace(baseline=[{"full_run": BASE}], encoder=lambda params: [0.0], rows=[])
    world = World(spec.space, table, {"full": surrogate}, 0.95, {}, 40.0, spec.base, None, None)
    return replay.Task(world, list(spec.warm_start), BASE.cost(N_GRID - 1), "tiny")


def test_a_replayed_variant_resolves_the_target_from_the_baseline_and_trains_the_recipes_next():
    from research.anytime import replay
    from research.anytime.variants import Variant

    task = _task()
    v = Variant("local", {"name": "random"}, "relative", ("recipes",), {"name": "none"})
    s = replay.VariantSearch(v, 0, task)
    s.run()
    assert s.target == pytest.approx(0.97)  # the baseline's final less a point, not the study's 0.95
    origins = [o for _, _, o in s.finished]
    assert origins[:2] == ["baseline", "recipe:small-batch"] and set(origins[2:]) == {"search"}
    found, _ = replay.search(v, 0, task)
    assert found.events[1].speedup == pytest.approx(1.5)  # 0.97 at 4/9 of its 9 s, the baseline's at 6/9
    assert max(e.speedup or 0 for e in found.events) == pytest.approx(3.0)
    assert found.recipe == pytest.approx(1.5)


def test_at_the_studys_target_the_search_is_told_its_own_target():
    from research.anytime import replay
    from research.anytime.variants import Variant

    task = _task()
    s = replay.VariantSearch(Variant("v", {"name": "random"}, "study", (), {"name": "none"}), 0, task)
    s.run()
    assert s.target == pytest.approx(0.95)
    assert [o for _, _, o in s.finished][:2] == ["baseline", "search"]  # no warm start


def test_an_unknown_variant_is_a_usage_error(capsys):
    from research.anytime.cli import main

    with pytest.raises(SystemExit) as e:
        main(["replay", "--only", "tpe,nope"])
    assert e.value.code == 2
    assert "no variant named nope" in capsys.readouterr().err


def test_a_live_variant_is_the_study_file_with_its_sampler_target_warm_starts_and_budget_in_runs(tmp_path):
    from research.anytime.live import study_mapping
    from research.anytime.variants import Variant

    study = tmp_path / "s.yaml"
    study.write_text(
        "name: s\nbase: {dataset: {name: digits}, target_accuracy: 0.95}\nwarm_start: [{epochs: 3}]\n"
        "sampler: {name: tpe, n_startup_trials: 8}\npruner: {name: moasha}\n"
        "tuning: {name: subset, target_accuracy: 0.75}\nn_trials: 20\n"
    )
    raw = study_mapping(Variant("local", {"name": "local"}), study, 1, 20)
    assert raw["sampler"] == {"name": "local"} and raw["warm_start"] == ["recipes"]  # the hand-picked one gone
    assert raw["budget"] == {"baseline_runs": 20} and raw["seed"] == 1 and raw["pruner"] == {"name": "moasha"}
    assert raw["base"]["target_accuracy"] == {"relative_to_baseline": -0.01}
    assert "target_accuracy" not in raw["tuning"]  # phase 1 relative to its own baseline
    kept = study_mapping(Variant("tpe@study-target", {"name": "tpe"}, "study", ()), study, 0, 10)
    assert kept["base"]["target_accuracy"] == 0.95 and kept["warm_start"] == []
