"""Named recipes: listed with their sources, queued as warm starts relative to the base, skipped with
a note where the rules or the machine refuse them, and the fastest one that reached the target is the
yardstick `status`, `export` and `best` read speed-ups against."""

import json

import pytest
import yaml

from effsearch.cli import main
from effsearch.config.machine import Machine
from effsearch.search.study import recipes, studyfile
from tests.support.helpers import tiny
from tests.support.tiny_study import study_file

NO_DOWNSAMPLING_PY = '''
import torch.nn as nn


def flat_cnn(num_classes, in_channels):
    """No stride, no pooling but the global one: BlurPool has nothing to blur."""
    return nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes))
'''


def write(folder, **keys):
    path = folder / "r.yaml"
    path.write_text(yaml.safe_dump({"name": "r", "base": tiny(), "n_trials": 3, "max_slowdown": None, **keys}))
    return path


def test_effsearch_recipes_lists_at_least_five_with_their_sources(capsys):
    assert main(["recipes"]) == 0
    out = capsys.readouterr().out
    listed = [line for line in out.splitlines() if line.startswith("recipe:")]
    assert len(listed) >= 5 and len(listed) == len(recipes.RECIPES)
    assert out.count("  source: ") == len(listed) and out.count("  helps: ") == len(listed)


def test_a_recipe_is_a_change_to_the_base_so_it_fits_the_users_config(tmp_path):
    spec = studyfile.load(
        write(tmp_path, warm_start=["recipe:large-batch", "recipe:half-budget"]), machine=Machine(cores=1)
    )
    (label1, big), (label2, half) = spec.warm_start
    assert (label1, label2) == ("recipe:large-batch", "recipe:half-budget")
    assert big.batch_size == 4 * spec.base.batch_size and big.optimizer.lr == pytest.approx(4 * spec.base.optimizer.lr)
    assert big.algorithms["label_smoothing"] == {"smoothing": 0.1}
    assert half.epochs == spec.base.epochs / 2 and half.schedule.name == "linear"
    assert half.model == spec.base.model and half.dataset == spec.base.dataset


@pytest.mark.parametrize("scaled", [False, True])
def test_small_batch_halves_the_batch_keeps_the_lr_a_step_and_trains_two_thirds_of_the_epochs(tmp_path, scaled):
    base = tiny(**{"batch_size": 64, "epochs": 6, "optimizer.lr": 0.05, "optimizer.scale_lr_with_batch": scaled})
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"name": "r", "base": base, "n_trials": 3, "warm_start": ["recipe:small-batch"]}))
    spec = studyfile.load(path, machine=Machine(cores=1))
    [(label, small)] = spec.warm_start
    assert label == "recipe:small-batch" and small.batch_size == 32 and small.epochs == pytest.approx(4)

    def per_step(c):  # the lr a step trains with
        return c.optimizer.lr * (c.batch_size / 128 if c.optimizer.scale_lr_with_batch else 1)

    assert per_step(small) == pytest.approx(per_step(spec.base))
    assert small.optimizer.lr == pytest.approx(0.1 if scaled else 0.05)


def test_recipes_the_machine_or_the_model_cannot_run_are_skipped_with_a_note(tmp_path, monkeypatch):
    (tmp_path / "flatmodels.py").write_text(NO_DOWNSAMPLING_PY)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write(tmp_path, warm_start=["recipes"])
    raw = yaml.safe_load(path.read_text())
    raw["base"]["model"] = {"name": "flatmodels:flat_cnn"}
    path.write_text(yaml.safe_dump(raw))
    spec = studyfile.load(path)  # this machine: a CPU
    labels = [label for label, _ in spec.warm_start]
    assert "recipe:bf16-channels-last" not in labels and "recipe:composer-mild" not in labels
    assert {"recipe:one-cycle", "recipe:label-smoothing", "recipe:half-budget"} <= set(labels)
    notes = "\n".join(spec.notes)
    assert "recipe:bf16-channels-last skipped" in notes and "needs a CUDA device" in notes
    assert "recipe:composer-mild skipped" in notes and "strided convolutions or max-pools" in notes


def test_an_unknown_recipe_is_exit_2_naming_the_entry(tmp_path, capsys):
    assert main(["space", "show", str(write(tmp_path, warm_start=[{"optimizer.lr": 0.1}, "recipe:turbo"]))]) == 2
    err = capsys.readouterr().err
    assert "warm_start[1]: unknown recipe 'turbo'" in err and "one-cycle" in err


@pytest.mark.slow
def test_status_export_and_best_read_speed_ups_over_the_best_recipe(tmp_path, capsys):
    path = study_file(tmp_path, n_trials=5, warm_start=["recipe:one-cycle", "recipe:label-smoothing"])
    assert main(["run", str(path), "--data-dir", str(tmp_path / "data")]) == 0
    capsys.readouterr()
    from effsearch.search.results.lookup import open_study
    from effsearch.search.store.queries import best_recipe
    from effsearch.search.store.record import Recorded

    study, _ = open_study(str(path))
    recipe = best_recipe(study.get_trials())
    assert recipe is not None and recipe.number in (1, 2)  # queued right after the baseline
    recipe_tta = Recorded.of(recipe).time_to_target

    assert main(["status", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"best known recipe: {recipe.user_attrs['warm_start']} (trial {recipe.number})" in out
    assert "x recipe" in out

    assert main(["export", str(path), "-o", str(tmp_path / "f.json"), "--all"]) == 0
    doc = json.loads((tmp_path / "f.json").read_text())
    assert doc["best_recipe"]["trial"] == recipe.number
    for r in doc["rows"]:
        if r["time_to_target"] is not None:
            assert r["speedup_over_recipe"] == pytest.approx(recipe_tta / r["time_to_target"])
    assert [r["warm_start"] for r in doc["rows"] if r["trial"] == recipe.number] == [recipe.user_attrs["warm_start"]]

    assert main(["best", str(path), "--pick", "fastest", "-o", str(tmp_path / "b.yaml")]) == 0
    assert "x the best known recipe (recipe:" in (tmp_path / "b.yaml").read_text()
