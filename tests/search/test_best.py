"""`effsearch best`: each pick on a study made of given values; the YAML trains as it is."""

import json
import re

import optuna
import pytest
import yaml
from optuna.trial import TrialState, create_trial

from effsearch.cli import main
from effsearch.config import TrainConfig
from effsearch.search.results import best, report
from effsearch.search.store.storage import open_url
from tests.support.fake_study import POINTS, add, config
from tests.support.tiny_study import built_study

# -- best --------------------------------------------------------------------------


def best_(storage_path, out, pick, study="fake") -> int:
    return main(["best", study, "--storage", str(storage_path), "--pick", pick, "-o", str(out)])


@pytest.mark.parametrize(
    "pick,trial",
    [
        ("knee", 2),
        ("fastest", 1),
        ("most-accurate", 3),
        ("fastest-above:0.9", 2),
        ("fastest-above:0.94", 0),
        # the baseline (trial 0) is at 0.95: 0.02 below lets trial 2 (0.93) in
        ("fastest-within:0.02", 2),
        ("fastest-within:0.019", 0),
    ],
)
def test_each_pick_writes_that_trial_s_config(storage_path, tmp_path, pick, trial):
    out = tmp_path / "best.yaml"
    assert best_(storage_path, out, pick) == 0
    assert TrainConfig.from_yaml(out).hash() == config(trial).hash()
    text = out.read_text()
    head = text[: text.index("\ndataset:")].splitlines()
    assert all(line.startswith("#") for line in head)
    head = "\n".join(head)
    assert f"--pick {pick}: trial {trial} of study 'fake'" in head and str(storage_path) in head
    assert f"test accuracy {POINTS[trial][1] - 0.01:.4f}" in head and "torch 2.7.0" in head
    assert "mosaicml) 0.32.1" in head and "exported 20" in head


def test_only_trials_that_reached_the_target_count(storage_path, tmp_path, capsys):
    assert best_(storage_path, tmp_path / "a.yaml", "fastest-above:0.999") == 1
    assert "no trial of study 'fake' satisfies --pick=fastest-above:0.999" in capsys.readouterr().err
    for pick in ("fastest", "knee", "fastest-above:0.5"):
        assert best_(storage_path, tmp_path / "a.yaml", pick, study="misses") == 1
    assert not (tmp_path / "a.yaml").exists()
    assert best_(storage_path, tmp_path / "b.yaml", "most-accurate", study="misses") == 0
    assert TrainConfig.from_yaml(tmp_path / "b.yaml").hash() == config(1).hash()


@pytest.mark.parametrize(
    "pick",
    [
        "slowest",
        "fastest-above",
        "fastest-above:",
        "fastest-above:x",
        "fastest-above:95",
        "fastest-above:0",
        "Knee",
        "fastest-within:1",
        "fastest-within:-0.01",
        "fastest-within:one",
    ],
)
def test_a_bad_pick_exits_2_before_the_study_is_opened(tmp_path, capsys, pick):
    assert best_(tmp_path / "none.journal", tmp_path / "b.yaml", pick, study="nope") == 2
    err = capsys.readouterr().err
    assert "--pick" in err and "Traceback" not in err
    assert ("fastest-within:0.01" if "within:" in pick else "fastest-above:0.95") in err


def test_fastest_within_needs_a_baseline(tmp_path, capsys):
    storage_path = tmp_path / "nobase.journal"
    storage = open_url(str(storage_path))
    study = optuna.create_study(study_name="nobase", storage=storage, directions=["minimize", "maximize"])
    study.set_user_attr("objectives", ["time_to_accuracy", "final_accuracy"])
    add(study, 1, 2.0, 0.8)
    assert best_(storage_path, tmp_path / "b.yaml", "fastest-within:0.01", study="nobase") == 2
    err = capsys.readouterr().err
    assert "fastest-within" in err and "'nobase' has none" in err and "Traceback" not in err
    assert not (tmp_path / "b.yaml").exists()


def test_an_unknown_study_lists_the_studies_there(storage_path, tmp_path, capsys):
    assert best_(storage_path, tmp_path / "b.yaml", "knee", study="nope") == 2  # bad input
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


def test_the_train_line_sets_the_thread_count_a_cpu_trial_had_where_this_process_has_another():
    # `run --workers 2` gives each worker half the cores; trained with all of them, the same
    # config sums in another order and gives other figures.
    import torch

    mine = torch.get_num_threads()
    study = optuna.create_study(directions=["minimize", "maximize"])
    study.set_user_attr("objectives", ["time_to_accuracy", "final_accuracy"])
    for n, threads in enumerate((mine + 1, mine)):
        add(study, n, 2.0, 0.9, device=f"cpu (x86_64, {threads} threads)")
    other, same = (best.header(study, "x.journal", t, "fastest", "b.yaml").splitlines()[-1] for t in study.trials)
    assert other.startswith(f"train it: OMP_NUM_THREADS={mine + 1} effsearch train b.yaml")
    assert same == "train it: effsearch train b.yaml"


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


def test_a_config_confirmed_with_several_seeds_is_judged_on_their_mean(tmp_path, capsys):
    """Phase 2 with ``seeds: 2``: the fastest single seed is a lucky draw. A (1.0 s and 5.0 s)
    means 3.0 s, B (2.5 s twice) 2.5 s, C's second seed missed, D's diverged: B is the fastest,
    C and D no hit."""
    from effsearch.search.results import report
    from effsearch.search.store import queries
    from tests.support.fake_study import add

    storage = open_url(str(tmp_path / "s.journal"))
    study = optuna.create_study(study_name="seeds", storage=storage, directions=["minimize", "maximize"])
    study.set_user_attr("objectives", ["time_to_accuracy", "final_accuracy"])
    add(study, 0, 10.0, 0.95, baseline=True)
    for n, tta, acc, tune in [
        (1, 1.0, 0.80, 7),
        (2, 5.0, 0.84, 7),
        (3, 2.5, 0.85, 8),
        (4, 2.5, 0.87, 8),
        (5, 0.5, 0.90, 9),
        (6, None, 0.70, 9),
    ]:
        add(study, n, tta, acc, tune_trial=tune, confirm_seed=n % 2)
    # D: the fastest seed of all, but its other seed diverged: a miss, not a pick
    add(study, 7, 0.3, 0.96, tune_trial=10, confirm_seed=0)
    study.add_trial(
        create_trial(state=TrialState.FAIL, user_attrs={"status": "diverged", "tune_trial": 10, "confirm_seed": 1})
    )
    out = tmp_path / "best.yaml"
    assert best_(tmp_path / "s.journal", out, "fastest", study="seeds") == 0
    assert TrainConfig.from_yaml(out).hash() == config(3).hash()
    head = out.read_text()
    assert "trial 3 of study 'seeds', the mean of its 2 seeds (trials 3, 4)" in head
    assert "final_accuracy 0.8600" in head and "4.00x the baseline" in head
    front = queries.front(optuna.load_study(study_name="seeds", storage=storage))
    assert [(t.number, t.values) for t in front] == [(3, [2.5, 0.86]), (0, [10.0, 0.95])]
    assert front[0].user_attrs["seed_trials"] == [3, 4] and front[0].user_attrs["time_to_target"] == 2.5
    table = report.status_table(
        optuna.load_study(study_name="seeds", storage=storage), ["time_to_accuracy", "final_accuracy"]
    )
    assert re.search(r"\n3\+4 +COMPLETE +2\.50 +0\.8600 +4\.00x", table[table.index("Pareto front") :])
    # the export names the seeds behind a front row
    assert main(["export", "seeds", "--storage", str(tmp_path / "s.journal"), "-o", str(tmp_path / "f.json")]) == 0
    rows = json.loads((tmp_path / "f.json").read_text())["rows"]
    assert [(r["trial"], r["seed_trials"]) for r in rows] == [(3, [3, 4]), (0, None)]


def test_status_says_a_queued_trial_is_not_run_yet_and_which_warm_start_it_is():
    """A warm start past n_trials (or a lost worker's trial queued again) waits in the study:
    status says so, rather than a bare WAITING row."""
    study = optuna.create_study(directions=["minimize", "maximize"])
    study.enqueue_trial({}, user_attrs={"warm_start": "recipe:small-batch"})
    study.enqueue_trial({})
    table = report.status_table(study, ["time_to_accuracy", "final_accuracy"])
    assert "queued (recipe:small-batch), not run yet" in table
    assert re.search(r"\n1 +WAITING .*queued, not run yet", table)


def test_a_trials_summary_names_what_makes_text_and_lm_trials_differ():
    """status's config column shows a text run's length, its ramps, the model's size and the gpt's
    switches off their defaults: two language-model trials that differ only there read apart."""
    lm = TrainConfig.from_dict(
        {
            "dataset": {"name": "text", "path": "c.txt", "max_length": 64},
            "model": {"name": "gpt", "kwargs": {"qk_norm": True, "tied": False, "activation": "gelu"}},
            "batch_ramp": 0.25,
            "length_warmup": 0.5,
        }
    ).to_dict()
    words = report.summary(lm).split(", ")
    assert {"len 64", "bs ramp 0.25", "len warmup 0.5", "qk_norm", "tied off"} <= set(words)
    assert "gelu" not in words  # the default
    enc = TrainConfig.from_dict(
        {"dataset": {"name": "jsonl", "path": "t.jsonl"}, "model": {"name": "text-encoder", "width": 64, "depth": 3}}
    ).to_dict()
    assert {"width 64", "depth 3", "mean pooling", "len 128"} <= set(report.summary(enc).split(", "))
    image = report.summary(TrainConfig.from_dict({"model": {"name": "tiny-cnn"}}).to_dict())
    assert "len" not in image and "width" not in image


TEXT_MODULE = """
import json
import torch.nn as nn


def load():
    rows = [json.loads(line) for line in open(__file__.replace("ownbag.py", "t.jsonl"))]
    return {"x_train": [r["text"] for r in rows], "y_train": [r["label"] for r in rows]}


class Bag(nn.Module):
    def __init__(self, vocab_size, num_classes):
        super().__init__()
        self.embed, self.head = nn.Embedding(vocab_size, 16), nn.Linear(16, num_classes)

    def forward(self, ids, mask):
        m = mask.unsqueeze(-1).float()
        return self.head((self.embed(ids) * m).sum(1) / m.sum(1))


def bag(vocab_size, num_classes):
    return Bag(vocab_size, num_classes)
"""


def test_a_text_trial_of_import_paths_shows_its_length_in_a_process_that_never_probed_it(tmp_path, monkeypatch):
    """Neither an import path's data nor its model says text by name: the trial records that it
    trained on token rows, and a status read elsewhere (no probe in that process) shows its length."""
    import effsearch
    from effsearch.config import sources
    from effsearch.search.store.attrs import TEXT_KEY
    from tests.support.text import write_jsonl

    write_jsonl(tmp_path / "t.jsonl")
    (tmp_path / "ownbag.py").write_text(TEXT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    base = {
        "dataset": {"name": "ownbag:load", "max_length": 24, "tokenizer": {"name": "bytes"}},
        "model": {"name": "ownbag:bag"},
        "epochs": 2,
        "batch_size": 32,
        "target_accuracy": 0.0,  # reached: a study whose trials all miss fails
        "device": "cpu",
    }
    study = effsearch.run_study({"name": "bags", "base": base, "n_trials": 1}, quiet=True)
    (trial,) = study.trials
    assert trial.user_attrs[TEXT_KEY] is True
    monkeypatch.setattr(sources, "_PROBED", {})  # another process: nothing probed
    row = report.table_row(trial, ["time_to_accuracy", "final_accuracy"], None, None, None)
    assert "len 24" in row[-1], row
    assert "len" not in report.summary(yaml.safe_load(trial.user_attrs["config"]))  # the config alone: unknown
