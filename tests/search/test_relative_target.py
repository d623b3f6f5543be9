"""A target relative to the baseline (``target_accuracy: {relative_to_baseline: -0.01}``, or on any
metric ``target: {metric: val_loss, relative_to_baseline: -0.1}``), resolved from trial 0's final
value before any other trial; refused where there is no baseline; and a budget in runs of the
baseline (``budget: {baseline_runs: N}``)."""

from __future__ import annotations

import threading

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from effsearch.cli import main
from effsearch.config import ConfigError, TrainConfig, targets
from effsearch.config.metrics import Target
from effsearch.search.run import objective, target
from effsearch.search.store.storage import BASELINE_KEY
from effsearch.trainer.result import Final, RunResult, time_to_target
from tests.search.test_study_run import load, write_study
from tests.support.helpers import tiny
from tests.support.text import corpus, lm_config

RELATIVE = {"relative_to_baseline": -0.01}


def test_the_target_is_the_baselines_final_less_a_point_for_every_later_trial(tmp_path, capsys, monkeypatch):
    from effsearch.trainer import loop

    monkeypatch.setitem(loop.EVAL_BATCH, "cpu", 8)  # several batches: a point below the target may settle early
    base = tiny(**{"dataset.synthetic_size": 256, "epochs": 3, "target_accuracy": RELATIVE})
    path = write_study(tmp_path, n_trials=4, base=base, warm_start=[{"epochs": 2}])
    assert main(["run", str(path)]) == 0
    assert "target val accuracy the baseline's final -0.01 (resolved when trial 0 completes)" in capsys.readouterr().err
    study, _ = load(path)
    trials = study.get_trials()
    b = trials[0].user_attrs
    resolved = b["val_accuracy"] - 0.01
    assert study.user_attrs["target_accuracy"] == pytest.approx(resolved)
    assert b["target_accuracy"] == pytest.approx(resolved)
    assert "val_images" not in str(b["history"])  # the baseline's points scored whole: the target was unknown
    assert b["time_to_target"] == time_to_target(b["history"], resolved, b["val_accuracy"])
    for t in trials:
        assert TrainConfig.from_dict(yaml.safe_load(t.user_attrs["config"])).target_accuracy == pytest.approx(resolved)
        if t.state == TrialState.COMPLETE and t.user_attrs["reached_target"]:
            assert t.values[0] == t.user_attrs["time_to_target"]  # timed to the resolved target
    assert trials[1].user_attrs.get("warm_start") == "warm_start[0]"


def test_a_relative_target_without_a_baseline_is_refused(tmp_path, capsys):
    with pytest.raises(ConfigError, match="relative to a study's baseline"):
        TrainConfig.from_dict(tiny(target_accuracy=RELATIVE))
    (tmp_path / "c.yaml").write_text(
        "dataset: {name: digits}\nepochs: 1\ntarget_accuracy: {relative_to_baseline: -0.01}\n"
    )
    assert main(["train", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert "c.yaml: target_accuracy:" in err and "give a number" in err
    path = write_study(tmp_path, base=tiny(target_accuracy={"relative_to_baseline": 0.5}))
    assert main(["run", str(path)]) == 2
    assert "base.target_accuracy.relative_to_baseline" in capsys.readouterr().err  # at most 0: within the baseline


LM_SPACE = {"include": ["optimizer.lr@adamw"], "ranges": {"optimizer.lr@adamw": {"low": 0.005, "high": 0.03}}}
LOSS_RELATIVE = {"metric": "val_loss", "relative_to_baseline": -0.1}


def test_a_relative_target_on_a_loss_is_the_baselines_final_loss_plus_the_offset(tmp_path, capsys):
    base = lm_config(corpus(tmp_path / "c.txt"), target=LOSS_RELATIVE)
    path = write_study(tmp_path, n_trials=3, base=base, space=LM_SPACE, warm_start=[{"optimizer.lr": 0.02}])
    assert main(["run", str(path), "--data-dir", str(tmp_path / "data")]) == 0
    assert "target val loss the baseline's final +0.1 (resolved when trial 0 completes)" in capsys.readouterr().err
    study, _ = load(path)
    trials = study.get_trials()
    b = trials[0].user_attrs
    resolved = b["val_loss"] + 0.1  # a loss: the offset -0.1 is 0.1 worse, above it
    assert study.user_attrs["target_metric"] == "val_loss"
    assert study.user_attrs["target_accuracy"] == pytest.approx(resolved)
    assert b["target_accuracy"] == pytest.approx(resolved) and b["target_metric"] == "val_loss"
    assert b["test_loss"] > 0  # a language model's test loss, in the trial's record
    assert b["time_to_target"] is not None
    assert b["time_to_target"] == time_to_target(b["history"], Target("val_loss", resolved), b["val_loss"])
    for t in trials:
        assert t.state == TrialState.COMPLETE, t.user_attrs.get("reason")
        cfg = TrainConfig.from_dict(yaml.safe_load(t.user_attrs["config"]))
        assert (cfg.target.metric, cfg.target.value) == ("val_loss", pytest.approx(resolved))
        if t.user_attrs["reached_target"]:
            assert t.values[0] == t.user_attrs["time_to_target"]  # timed to the resolved loss
    assert trials[1].user_attrs.get("warm_start") == "warm_start[0]"


@pytest.mark.parametrize(
    "target_given,extra,field,words",
    [
        ({"metric": "val_loss", "relative_to_baseline": 0.5}, {}, "base.target.relative_to_baseline", "0.01 above"),
        ({"metric": "val_bpb", "relative_to_baseline": -2}, {}, "base.target.relative_to_baseline", "-1"),
        ({"metric": "val_loss", "relative_to_baseline": -0.1, "value": 2.0}, {}, "base.target.value", "one or the"),
        ({"metric": "val_perplexity", "relative_to_baseline": -0.1}, {}, "base.target.metric", "unknown metric"),
        ({"metric": "val_loss", "relative_to_baseline": -0.1, "by": 1}, {}, "base.target.by", "allowed"),
        (LOSS_RELATIVE, {"target_accuracy": {"relative_to_baseline": -0.01}}, "base.target_accuracy", "two targets"),
    ],
)
def test_a_bad_relative_target_on_a_metric_names_its_field(tmp_path, capsys, target_given, extra, field, words):
    base = lm_config(corpus(tmp_path / "c.txt"), target=target_given, **extra)
    path = write_study(tmp_path, base=base, space=LM_SPACE)
    assert main(["run", str(path), "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert f"{field}:" in err and words in err, err
    assert not (tmp_path / "data").exists() and not path.with_suffix(".journal").exists()


def test_a_relative_loss_target_in_a_training_config_or_one_resolving_to_no_loss_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="relative to a study's baseline") as e:
        TrainConfig.from_dict(lm_config(corpus(tmp_path / "c.txt"), target=LOSS_RELATIVE))
    assert e.value.field == "target.relative_to_baseline"
    # The seam: a loss the offset worse is above it; a final loss of 0 (no real model's) makes none.
    assert targets.resolve("val_loss", 2.0, -0.1) == pytest.approx(2.1)
    assert targets.resolve("val_accuracy", 0.995, 0.0) == 0.995 and targets.resolve("val_accuracy", 0.2, -0.5) == 0.0
    assert targets.resolve("val_loss", 0.0, 0.0) is None
    study = optuna.create_study(directions=["minimize", "minimize"])
    zero = RunResult(status="completed", config={}, target_metric="val_loss", final=Final(val_loss=0.0))
    with pytest.raises(target.NoBaseline, match="makes no target"):
        target.resolve_from(study, zero, 0.0)
    assert target.resolved(study) is None


def test_a_trial_waits_for_the_baseline_to_resolve_the_target():
    study = optuna.create_study(directions=["minimize", "maximize"])
    study.enqueue_trial({}, user_attrs={BASELINE_KEY: True})
    trial = study.ask()  # the baseline, running on another worker
    threading.Timer(0.3, lambda: study.set_user_attr(target.RESOLVED_KEY, 0.97)).start()
    assert target.wait(study, poll=0.05) == 0.97
    study.tell(trial, state=TrialState.FAIL)
    study.set_user_attr(target.RESOLVED_KEY, None)
    with pytest.raises(target.NoBaseline):
        target.wait(study, poll=0.05)  # the baseline failed: nothing to resolve from


def test_a_budget_in_baseline_runs_stops_at_that_many_baseline_trials(tmp_path, capsys, monkeypatch):
    ticks = iter(range(0, 10_000, 5))
    monkeypatch.setattr(objective, "clock", lambda: next(ticks))  # every trial takes 5 wall seconds
    path = write_study(tmp_path, n_trials=None, budget={"baseline_runs": 3})
    assert main(["run", str(path)]) == 0
    err = capsys.readouterr().err
    assert "budget 3 baseline runs" in err and "compute: 15.0 s" in err
    assert len(load(path)[0].get_trials()) == 3  # 3 x the baseline's 5 s
    path = write_study(tmp_path, budget={"baseline_runs": 0})
    assert main(["run", str(path)]) == 2
    assert "budget.baseline_runs" in capsys.readouterr().err


def _earlier_study(path) -> dict:
    """A finished study on another task, written as effsearch records it: the baseline and a faster
    trial that trained with a higher lr for fewer epochs (on the front), and a slow one (not)."""
    from optuna.distributions import FloatDistribution
    from optuna.trial import create_trial

    from effsearch.search.store.storage import open_url

    study = optuna.create_study(study_name="earlier", storage=open_url(str(path)), directions=["minimize", "maximize"])
    base = tiny(**{"dataset.synthetic_size": 320})
    fast = tiny(**{"dataset.synthetic_size": 320, "optimizer.lr": 0.2, "epochs": 1})
    slow = tiny(**{"dataset.synthetic_size": 320, "optimizer.lr": 0.01})
    for cfg, values, baseline in ((base, [4.0, 0.9], True), (fast, [1.0, 0.9], False), (slow, [8.0, 0.8], False)):
        attrs = {"config": TrainConfig.from_dict(cfg).to_yaml(), "reached_target": True, "time_to_target": values[0]}
        attrs["baseline"] = baseline
        dist = {"optimizer.lr": FloatDistribution(0.001, 1.0)}
        study.add_trial(
            create_trial(
                values=values, params={"optimizer.lr": cfg["optimizer"]["lr"]}, distributions=dist, user_attrs=attrs
            )
        )
    return fast


def test_an_earlier_studys_front_warm_starts_another_task_as_changes_from_its_baseline(tmp_path, capsys):
    from effsearch.search.run import warmstart
    from effsearch.search.study.studyfile import load as load_file

    _earlier_study(tmp_path / "earlier.journal")
    other = tiny(**{"dataset.synthetic_size": 192, "epochs": 4, "model.width": 4})
    b = write_study(tmp_path, n_trials=1, base=other, warm_start=["study:earlier@earlier.journal"])
    spec = warmstart.with_earlier_studies(load_file(b))
    assert [label for label, _ in spec.warm_start] == ["study:earlier trial 1"]  # the front, less its baseline
    cfg = spec.warm_start[0][1]
    assert cfg.optimizer.lr == 0.2 and cfg.epochs == 1  # how it trained, carried over
    assert cfg.dataset.synthetic_size == 192 and cfg.model.width == 4  # what it trains on: this study's
    for entry, says in (("study:earlier", "study:NAME@STORAGE"), ("study:earlier@nowhere.journal", "no such storage")):
        bad = write_study(tmp_path, warm_start=[entry])
        assert main(["run", str(bad)]) == 2
        err = capsys.readouterr().err
        assert "warm_start[0]" in err and says in err
