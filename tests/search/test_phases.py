"""The pruner and the tuning phase inside real studies, with a scripted trainer.

Trials train with tests/support/scripted.py's stand-in (injected: the ``scripted`` fixture), a
function that plays a learning curve decided by the config (accuracy grows with the learning
rate, time with the epochs), so which trials the pruner stops and which configurations phase 2
confirms are known in advance, and the studies run in a second or two.
"""

import json
import math
import re

import optuna
import pytest
import yaml
from optuna.trial import TrialState

import effsearch.trainer.training as trainer_run
from effsearch.cli import main
from effsearch.config import ConfigError, TrainConfig
from effsearch.config.options import SubsetTuning
from effsearch.search.run import workers
from effsearch.search.store.storage import open_url
from effsearch.search.study import phases, studyfile
from tests.support.helpers import ran, tiny
from tests.support.scripted import scripted_train
from tests.support.text import corpus, lm_config


def write(tmp_path, **kw):
    d = {
        "name": "ph",
        "base": tiny(**{"epochs": 4, "eval_every": 0.5, "target_accuracy": 0.6}),
        "n_trials": 10,
        "seed": 1,
        "sampler": "random",
        "space": {"include": ["optimizer.lr"], "ranges": {"optimizer.lr": {"low": 0.01, "high": 0.2}}},
    }
    d.update(kw)
    path = tmp_path / "ph.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def studies(path):
    storage = open_url(str(path.with_suffix(".journal")))
    return {n: optuna.load_study(study_name=n, storage=storage) for n in optuna.get_all_study_names(storage)}


def test_the_pruner_stops_weak_trials_and_keeps_their_curve(tmp_path, scripted, capsys):
    path = write(
        tmp_path, pruner={"name": "moasha", "eta": 3, "min_fraction": 0.125, "min_trials": 3, "clock": "budget"}
    )
    assert main(["run", str(path)]) == 0
    assert (
        "pruner     moasha (eta 3, min_fraction 0.125, min_trials 3, rank predicted, clock budget, time_fraction 0.15)"
    ) in capsys.readouterr().err
    trials = studies(path)["ph"].get_trials()
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    assert pruned and done and len(pruned) + len(done) == 10
    assert trials[0].state == TrialState.COMPLETE  # the baseline is never pruned
    for t in pruned:
        assert t.user_attrs["reason"].startswith("pruned at rung")
        assert t.user_attrs["status"] == "pruned"
        assert 0 < len(t.user_attrs["history"]) < 8  # stopped at the deciding evaluation, curve kept
        rung = int(t.user_attrs["reason"].split()[3])
        assert f"rung_{rung}" in t.user_attrs
    # Every pruned trial had a lower lr (so a lower curve) than the best trial that saw its rung.
    best_lr = max(t.params["optimizer.lr"] for t in done)
    assert all(t.params["optimizer.lr"] < best_lr for t in pruned)


def test_no_pruner_prunes_nothing(tmp_path, scripted):
    path = write(tmp_path, n_trials=5)
    assert main(["run", str(path)]) == 0
    assert all(t.state == TrialState.COMPLETE for t in studies(path)["ph"].get_trials())


def reached_at(lr: float, target: float = 0.6) -> float | None:
    """The first train second at which ``scripted_train``'s curve for ``lr`` (all the data) is at
    ``target``: its points every half epoch, a second an epoch."""
    ceiling = min(0.95, 0.4 + 3 * lr)
    return next((e for e in (k / 2 for k in range(1, 9)) if ceiling * (1 - math.exp(-2 * e)) >= target), None)


def test_max_slowdown_stops_a_trial_short_of_the_target_at_its_mark(tmp_path, scripted, capsys):
    # A baseline at lr 0.1 reaches the target 0.6 at its second point (1 s): max_slowdown 2 puts
    # the mark at 2 s, half of the 4 s every trial would train. (At write()'s lr 0.05 the baseline
    # never reaches the target, and there is no mark at all.)
    base = tiny(**{"epochs": 4, "eval_every": 0.5, "target_accuracy": 0.6, "optimizer.lr": 0.1})
    path = write(tmp_path, base=base, max_slowdown=2)
    assert reached_at(0.1) == 1.0
    assert main(["run", str(path)]) == 0
    trials = studies(path)["ph"].get_trials()
    assert trials[0].user_attrs["baseline"] and trials[0].user_attrs["time_to_target"] == 1.0
    late = [t for t in trials if (reached_at(t.params["optimizer.lr"]) or math.inf) > 2.0]
    assert late and len(late) < len(trials)  # the random lrs fall on both sides of the mark
    for t in trials:
        seconds = [p["train_seconds"] for p in t.user_attrs["history"]]
        if t in late:  # stopped at the first point at or past 2 x 1 s, short of the target
            assert t.state == TrialState.PRUNED and seconds[-1] == 2.0, (t.number, seconds)
            assert "more than 2x the baseline's time to target (1.00s; max_slowdown" in t.user_attrs["reason"]
        else:  # reached the target by the mark: runs to its end
            assert t.state == TrialState.COMPLETE and seconds[-1] == 4.0, (t.number, seconds)


def _picked(path, pick, tmp_path, capsys) -> int:
    assert main(["best", str(path), "--pick", pick, "-o", str(tmp_path / "best.yaml")]) == 0
    return int(re.search(r"trial (\d+) \(", capsys.readouterr().err).group(1))


def test_a_tuning_phase_on_a_language_model_confirms_its_picks_and_picks_by_the_loss(tmp_path, capsys):
    """Real training (no script): a tiny gpt timed to val loss 3.5. Phase 1 trains on half the token
    stream, phase 2 confirms the top 2 on all of it with 2 seeds each, and the picks read a loss as
    lower-is-better: the most accurate is the least loss, fastest-within:D a loss at most D above
    the baseline's."""
    path = write(
        tmp_path,
        base=lm_config(corpus(tmp_path / "c.txt")),
        n_trials=3,
        space={"include": ["optimizer.lr@adamw"]},
        warm_start=[{"optimizer.lr": 0.02}, {"optimizer.lr": 0.03}],
        tuning={"name": "subset", "data_fraction": 0.5, "top_k": 2, "seeds": 2},
    )
    assert main(["run", str(path), "--data-dir", str(tmp_path / "data")]) == 0
    err = capsys.readouterr().err
    assert "phase 2 of 2 (confirm)" in err and "target val loss <= 3.5" in err
    s = studies(path)
    tune, confirm = s["ph-tune"], s["ph"]
    assert [d.name for d in confirm.directions] == ["MINIMIZE", "MINIMIZE"]
    assert tune.user_attrs["target_metric"] == confirm.user_attrs["target_metric"] == "val_loss"
    t1 = tune.get_trials()
    for t in t1:
        assert t.state == TrialState.COMPLETE, t.user_attrs.get("reason")
        cfg = TrainConfig.from_dict(yaml.safe_load(t.user_attrs["config"]))
        full = TrainConfig.from_dict(yaml.safe_load(t.user_attrs["full_config"]))
        assert (cfg.dataset.data_fraction, full.dataset.data_fraction) == (0.5, 1.0)
        assert cfg.target == full.target and (cfg.target.metric, cfg.target.value) == ("val_loss", 3.5)
    t2 = confirm.get_trials()
    assert len(t2) == 1 + 2 * 2 and all(t.state == TrialState.COMPLETE for t in t2)
    assert sorted(t.user_attrs["tune_trial"] for t in t2[1:]) == [1, 1, 2, 2]
    points = {t.number: t.user_attrs for t in phases.seed_means(t2)}  # one point a config: its seeds' mean
    assert len(points) == 3
    base = points[0]["val_loss"]
    assert _picked(path, "most-accurate", tmp_path, capsys) == min(points, key=lambda n: points[n]["val_loss"])
    within = [n for n, a in points.items() if a["reached_target"] and a["val_loss"] <= base + 0.5]
    fastest = min(within, key=lambda n: (points[n]["time_to_target"], points[n]["val_loss"], n))
    assert _picked(path, "fastest-within:0.5", tmp_path, capsys) == fastest
    tuning = {"name": "subset", "target_accuracy": 0.5}
    bad = write(tmp_path, base=lm_config(corpus(tmp_path / "c.txt")), tuning=tuning)
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "tuning.target_accuracy:" in err and "val loss" in err


def test_tuning_phase_confirms_the_top_k_on_full_data(tmp_path, scripted, capsys):
    # seeds: the default, 2 (one seed's time to target is a draw)
    tuning = {"name": "subset", "data_fraction": 0.25, "epochs_fraction": 0.5, "target_accuracy": 0.5, "top_k": 3}
    path = write(tmp_path, n_trials=6, tuning=tuning)
    assert main(["run", str(path)]) == 0
    err = capsys.readouterr().err
    assert "phase 1 of 2 (tune)" in err and "phase 2 of 2 (confirm)" in err and "Kendall tau" in err
    s = studies(path)
    tune, confirm = s["ph-tune"], s["ph"]
    assert tune.user_attrs["confirm_study"] == "ph" and confirm.user_attrs["tune_study"] == "ph-tune"
    assert tune.user_attrs["target_accuracy"] == 0.5 and confirm.user_attrs["target_accuracy"] == 0.6

    t1 = tune.get_trials()
    assert len(t1) == 6 and all(t.state == TrialState.COMPLETE for t in t1)
    for t in t1:  # phase 1 trains a quarter of the data for half the epochs; full_config is the original
        cfg = TrainConfig.from_dict(yaml.safe_load(t.user_attrs["config"]))
        full = TrainConfig.from_dict(yaml.safe_load(t.user_attrs["full_config"]))
        assert cfg.dataset.data_fraction == 0.25 * full.dataset.data_fraction
        assert (cfg.epochs, full.epochs, cfg.target_accuracy, full.target_accuracy) == (2, 4, 0.5, 0.6)
        assert t.user_attrs.get("test_accuracy") is None  # phase 1 scores no test set

    t2 = confirm.get_trials()
    assert len(t2) == 1 + 3 * 2 and t2[0].user_attrs["baseline"]
    picked = phases.top_k(t1, ["minimize", "maximize"], 3)
    assert sorted({t.user_attrs["tune_trial"] for t in t2[1:]}) == sorted(p.number for p in picked)
    for t in t2[1:]:
        source = t1[t.user_attrs["tune_trial"]]
        assert t.state == TrialState.COMPLETE and t.params == source.params
        assert t.user_attrs["tune_values"] == list(source.values)
        full = TrainConfig.from_dict(yaml.safe_load(source.user_attrs["full_config"]))
        ran = TrainConfig.from_dict(yaml.safe_load(t.user_attrs["config"]))
        assert ran == full.replace(seed=t.user_attrs["confirm_seed"])
        assert t.user_attrs["test_accuracy"] is not None
    assert sorted(t.user_attrs["confirm_seed"] for t in t2[1:]) == [0, 0, 0, 1, 1, 1]
    # The seed is in the config: each seed of a confirmed config is trained, never answered as a duplicate.
    assert len({t.user_attrs["config_hash"] for t in t2}) == 7 and not any("duplicate_of" in t.user_attrs for t in t2)

    # A rerun finds both phases done and adds nothing.
    assert main(["run", str(path)]) == 0
    s = studies(path)
    assert len(s["ph-tune"].trials) == 6 and len(s["ph"].trials) == 7
    assert main(["status", str(path)]) == 0
    out = capsys.readouterr().out
    assert "how phase 1 predicted phase 2, over 3 configurations" in out, out[-600:]
    assert main(["export", str(path), "-o", str(tmp_path / "front.json")]) == 0
    doc = json.loads((tmp_path / "front.json").read_text())
    assert doc["tuning_phase"]["tune_study"] == "ph-tune"
    assert doc["tuning_phase"]["rank_correlation"]["n"] == 3
    assert set(doc["tuning_phase"]["rank_correlation"]["final_accuracy"]) == {"kendall_tau", "spearman_rho"}
    assert all(r["tune_trial"] in {p.number for p in picked} for r in doc["rows"] if not r["baseline"])
    # The front has each confirmed configuration once, at the mean of its two seeds.
    assert all(len(r["seed_trials"]) == 2 for r in doc["rows"] if not r["baseline"])


@pytest.mark.parametrize("workers", [1, 2])
def test_phase_2_trains_only_what_phase_1_gave_when_it_gave_fewer_than_top_k(tmp_path, scripted, capsys, workers):
    """Phase 1 completes 2 configurations besides its baseline; top_k is 4: phase 2 confirms those 2
    and samples nothing in the 2 slots left (random configurations would reach the front unconfirmed)."""
    tuning = {"name": "subset", "data_fraction": 0.25, "epochs_fraction": 0.5, "top_k": 4, "seeds": 1}
    path = write(tmp_path, n_trials=3, tuning=tuning, workers=workers)
    assert main(["run", str(path)]) == 0
    err = capsys.readouterr().err
    assert "(phase 1 completed 2 besides its baseline, not top_k 4)" in err, err[-1500:]
    t2 = ran(studies(path)["ph"].get_trials())
    assert len(t2) == 3 and t2[0].user_attrs["baseline"]
    assert all("tune_trial" in t.user_attrs for t in t2[1:]), [t.params for t in t2]


def test_top_k_spreads_along_the_front():
    study = optuna.create_study(directions=["minimize", "maximize"])
    pts = [(1, 0.5), (2, 0.7), (3, 0.8), (4, 0.9), (2.5, 0.6), (5, 0.85)]
    for i, v in enumerate(pts):
        study.add_trial(optuna.trial.create_trial(values=list(v), user_attrs={"full_config": f"x{i}"}))
    picked = [t.number for t in phases.top_k(study.trials, ["minimize", "maximize"], 3)]
    assert picked[:2] == [0, 3] and picked[2] in (1, 2)  # both ends of the front first, then the middle
    assert sorted(t.number for t in phases.top_k(study.trials, ["minimize", "maximize"], 4)) == [0, 1, 2, 3]


def test_rank_correlation_is_computed_right():
    study = optuna.create_study(directions=["minimize", "maximize"])
    # Phase-1 time ranks 1 2 3 4, phase 2 (mean of two seeds) ranks 1 3 2 4: tau = 4/6, rho = 0.8.
    tune_time, confirm_time = [1, 2, 3, 4], [10, 30, 20, 40]
    tune_acc, confirm_acc = [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]  # reversed: -1 and -1
    for i in range(4):
        for d in (-1, 1):  # two seeds around the same mean
            study.add_trial(
                optuna.trial.create_trial(
                    values=[confirm_time[i] + d, confirm_acc[i] + d * 0.01],
                    user_attrs={"tune_trial": i, "tune_values": [tune_time[i], tune_acc[i]], "confirm_seed": d},
                )
            )
    c = phases.correlation(study, ["time_to_accuracy", "final_accuracy"])
    assert c["n"] == 4
    assert c["time_to_accuracy"]["kendall_tau"] == pytest.approx(4 / 6, abs=1e-4)
    assert c["time_to_accuracy"]["spearman_rho"] == pytest.approx(0.8, abs=1e-4)
    assert c["final_accuracy"] == {"kendall_tau": -1.0, "spearman_rho": -1.0}
    assert phases.correlation(optuna.create_study(directions=["minimize", "maximize"]), ["a", "b"]) is None


@pytest.mark.parametrize(
    "key,value,field",
    [
        ("pruner", {"name": "moasha", "eta": 1}, "pruner.eta"),
        ("pruner", {"name": "moasha", "min_fraction": 1.5}, "pruner.min_fraction"),
        ("pruner", {"name": "moasha", "patience": 3}, "pruner.patience"),
        ("tuning", {"name": "subset", "data_fraction": 1.5}, "tuning.data_fraction"),
        ("tuning", {"name": "subset", "top_k": 0}, "tuning.top_k"),
        ("tuning", {"name": "subset", "val_subset": 1.5}, "tuning.val_subset"),
        ("tuning", "halving", "tuning"),
    ],
)
def test_bad_pruner_and_tuning_knobs_name_the_field(tmp_path, key, value, field):
    path = write(tmp_path, **{key: value})
    with pytest.raises(ConfigError) as e:
        studyfile.load(path)
    assert e.value.field == field


@pytest.fixture
def five_second_trials(monkeypatch):
    from effsearch.search.run import objective

    ticks = iter(range(0, 10_000, 5))
    monkeypatch.setattr(objective, "clock", lambda: next(ticks))  # every trial takes 5 wall seconds


def budget_study(folder, budget, seeds=1):
    return write(
        folder, n_trials=20, budget=budget, tuning={"name": "subset", "data_fraction": 0.5, "top_k": 2, "seeds": seeds}
    )


def test_a_budget_covers_both_phases(tmp_path, scripted, capsys, five_second_trials):
    # Phase 2 is expected to cost (1 + 2 x 1) trials x (the baseline's 2 train s / 0.5 of the data
    # + its other 3 s, which do not shrink with the data) = 21 s: phase 1 stops once 60 - 21 is spent.
    path = budget_study(tmp_path, 60)
    assert main(["run", str(path)]) == 0
    s = studies(path)
    assert len(s["ph-tune"].get_trials()) == 8 and len(s["ph"].get_trials()) == 3
    err = capsys.readouterr().err
    assert "compute: 55.0 s (the summed wall seconds of both phases' trials: phase 1 40.0 s, phase 2 15.0 s)" in err
    # The cost counts both phases (8 + 3 trials of 5 s) in runs of phase 2's baseline (5 s).
    assert "cost: 55.0 s of compute = 11.0 runs of the baseline (its trial took 5.0 s)" in err

    # A baseline that spends half a budget that phase 2 alone would eat: phase 1 runs it and
    # nothing else; the study says so and exits 1 instead of confirming nothing.
    (tmp_path / "small").mkdir()
    path = budget_study(tmp_path / "small", 10)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert "budget: 10 compute seconds leave nothing for phase 1's search" in err and "at least 52" in err
    assert "ph" not in studies(path)  # phase 2 never started


def test_phase_1_keeps_half_the_budget_and_phase_2_names_what_it_left(tmp_path, scripted, capsys, five_second_trials):
    # On Fashion-MNIST, phase 2's reserve (one costly pick) stopped phase 1 after 74 of 250
    # trials. Here the reserve, 7 + 2 seeds x 2 picks x 7 = 35 s, would leave phase 1 of a 40 s
    # budget nothing after its 5 s baseline; it spends half (4 trials), and phase 2 confirms what
    # the other half buys (the baseline and 3 of its 4 runs) and names the pick it left.
    path = budget_study(tmp_path, 40, seeds=2)
    assert main(["run", str(path)]) == 0
    s = studies(path)
    assert len(s["ph-tune"].get_trials()) == 4
    confirm = s["ph"].get_trials()
    done = [t for t in confirm if t.state == TrialState.COMPLETE]
    left = [t for t in confirm if t.state == TrialState.WAITING]
    assert len(done) == 4 and len(left) == 1
    err = capsys.readouterr().err
    assert f"phase 2 left phase 1's trials [{left[0].user_attrs['tune_trial']}] unconfirmed" in err
    # Both phases draw on one budget, and each says how.
    assert "s left to phase 1 (it keeps phase 2's expected cost, at least half the budget)" in err
    spent_1 = re.search(r"budget 40 compute s \((\d+) s spent, \1 s of it by phase 1\)", err)
    assert spent_1 and int(spent_1.group(1)) > 0
    assert re.search(r"both phases' trials: phase 1 [\d.]+ s, phase 2 [\d.]+ s\); budget 40 s, [\d.]+ s left", err)
    total = re.search(r"compute: ([\d.]+) s \(the summed wall seconds of both phases", err)
    assert total and f"cost: {total.group(1)} s of compute" in err  # one figure, not phase 2's alone


def test_ctrl_c_in_phase_2_s_baseline_ends_the_run_as_interrupted_and_the_rerun_trains_it_first(
    tmp_path, capsys, scripted, monkeypatch
):
    # Ctrl-C while phase 2 trains its baseline queues the baseline again (a trial with no
    # tune_trial) beside phase 1's queued picks: the run still ends as interrupted, exit 130.
    interrupted = []

    def train(cfg, **kw):
        if cfg.dataset.data_fraction == 1.0 and not interrupted:  # phase 2's first trial: its baseline
            interrupted.append(cfg)
            raise KeyboardInterrupt
        return scripted_train(cfg, **kw)

    scripted(train)
    path = write(tmp_path, n_trials=4, tuning={"name": "subset", "data_fraction": 0.5, "top_k": 2, "seeds": 1})
    assert main(["run", str(path)]) == 130
    waiting = [t for t in studies(path)["ph"].get_trials() if t.state == TrialState.WAITING]
    assert [t.user_attrs.get("tune_trial") is None for t in waiting].count(True) == 1  # the baseline's retry
    assert waiting[-1].user_attrs.get("baseline") and len(waiting) == 3
    assert "interrupted: finished trials are kept" in capsys.readouterr().err
    # The rerun trains the baseline's retry first: Optuna draws waiting trials by number, and in
    # that order the picks would have had no baseline to read a speed-up against.
    warmed = []
    warm_up = workers.warm_up
    monkeypatch.setattr(workers, "warm_up", lambda cfg, *a, **k: warmed.append(cfg) or warm_up(cfg, *a, **k))
    assert main(["run", str(path)]) == 0
    done = [t for t in studies(path)["ph"].get_trials() if t.state == TrialState.COMPLETE]
    assert len(done) == 3
    first = min(done, key=lambda t: t.datetime_start)
    assert first.user_attrs.get("baseline") and first.number == max(t.number for t in done)
    # Phase 1 had nothing left: its pre-flight skipped the warm-up, so phase 2 warmed up on its own
    # baseline's config before its first timed trial.
    assert [c.dataset.data_fraction for c in warmed] == [1.0]
    # Two picks rank nothing: the '-' says why.
    err = capsys.readouterr().err
    assert "Kendall tau -" in err and "(-: a rank correlation needs 3 configurations or more" in err
    # A rerun of the finished study trains nothing, so it warms nothing up (10 s on the quickstart).
    assert main(["run", str(path)]) == 0
    assert len(warmed) == 1 and "warm-up" not in capsys.readouterr().err


def test_phase_1_s_baseline_missing_the_full_data_s_target_is_told_how_phase_1_gets_its_own(tmp_path, capsys, scripted):
    # A subset trains fewer steps: the full data's target can be out of its reach (the scripted
    # curves top out at 0.9025 on half the data, 0.95 on all of it, for these lrs).
    scripted(scripted_train)
    base = tiny(**{"epochs": 4, "eval_every": 0.5, "target_accuracy": 0.92, "optimizer.lr": 0.2})
    space = {"include": ["optimizer.lr"], "ranges": {"optimizer.lr": {"low": 0.19, "high": 0.2}}}
    tuning = {"name": "subset", "data_fraction": 0.5, "top_k": 1, "seeds": 1}
    path = write(tmp_path, base=base, n_trials=2, space=space, tuning=tuning)
    # Phase 1 has no front, yet it is not a failure: its pick reaches the target on the full data.
    assert main(["run", str(path)]) == 0
    err = capsys.readouterr().err
    assert "phase 1's baseline (trial 0, on the data subset) missed the target 0.92" in err
    assert "tuning.target_accuracy, or a target relative to the baseline" in err
    assert "no front" not in err
    study = optuna.load_study(study_name="ph", storage=open_url(str(path.with_suffix(".journal"))))
    assert study.best_trials


def test_batch_sizes_that_reach_the_training_set_are_named_before_the_first_trial(tmp_path, capsys, scripted):
    # 16 and 32 train different runs on the tiny set's training split; 512 and 1024 train one full
    # batch an epoch each, the same run: the header says so, with what narrows them.
    scripted(scripted_train)
    space = {"include": ["batch_size"], "ranges": {"batch_size": {"choices": [16, 32, 512, 1024]}}}
    base = tiny(**{"epochs": 4, "eval_every": 0.5, "target_accuracy": 0.5})  # lr 0.05's curve tops out at 0.55
    path = write(tmp_path, n_trials=1, space=space, base=base)
    assert main(["run", str(path)]) == 0
    note = re.search(
        r"note +batch_size choices 512, 1024 reach the (\d+) training examples: .*", capsys.readouterr().err
    )
    assert note and 32 < int(note.group(1)) < 512 and "space.ranges.batch_size" in note.group(0)
    space["ranges"]["batch_size"]["choices"] = [16, 32, 512]  # one full-batch choice: one run, nothing to say
    assert main(["run", str(write(tmp_path, n_trials=1, space=space, base=base, name="ph2"))]) == 0
    assert "reach the" not in capsys.readouterr().err


def test_top_k_picks_distinct_configs():
    study = optuna.create_study(directions=["minimize", "maximize"])
    # Trials 0 and 1 trained the same config (1 was answered from storage): 1 is skipped, 3 comes in.
    for v, h in (((1, 0.5), "a"), ((1, 0.5), "a"), ((4, 0.9), "b"), ((2, 0.6), "c")):
        study.add_trial(optuna.trial.create_trial(values=list(v), user_attrs={"full_config": "x", "config_hash": h}))
    picked = phases.top_k(study.trials, ["minimize", "maximize"], 3)
    assert sorted(t.number for t in picked) in ([0, 2, 3], [1, 2, 3])
    assert len({t.user_attrs["config_hash"] for t in picked}) == 3


def test_phase_2_queues_its_picks_cheapest_first():
    # A budget that runs out in phase 2 must leave the costliest pick unconfirmed, not a fast
    # recipe: the accurate end of the front (here trial 1) can cost 5x the rest.
    tune = optuna.create_study(directions=["minimize", "maximize"])
    for v, wall in (((1, 0.5), 8.0), ((4, 0.9), 90.0), ((2, 0.7), 7.0)):
        tune.add_trial(
            optuna.trial.create_trial(
                params={"epochs": 2.0},
                distributions={"epochs": optuna.distributions.FloatDistribution(1, 8)},
                values=list(v),
                user_attrs={"full_config": f"c{wall}", "wall_seconds": wall},
            )
        )
    confirm = optuna.create_study(directions=["minimize", "maximize"])
    spec = type(
        "Spec",
        (),
        {"tuning": SubsetTuning(top_k=3, seeds=1), "directions": ["minimize", "maximize"], "base": TrainConfig()},
    )()
    picked = phases.queue_confirm(spec, tune, confirm)
    assert sorted(picked) == [0, 1, 2]  # which configurations: unchanged
    queued = [t.user_attrs["tune_trial"] for t in confirm.get_trials(states=(TrialState.WAITING,))]
    assert queued == [2, 0, 1]  # 7 s, 8 s, then the 90 s one


def test_phase_2_s_reserve_costs_each_pick_at_its_own_phase_1_cost():
    # Baseline: 2 train s of 5 wall on half the data -> 4 + 3 = 7 s on all of it. A pick that
    # trained 40 s of 50 -> 80 + 10 = 90 s: the reserve holds that, not a second baseline.
    from effsearch.search.run import budget

    study = optuna.create_study(directions=["minimize", "maximize"])
    study.add_trial(
        optuna.trial.create_trial(
            values=[10.0, 0.8],
            user_attrs={"baseline": True, "full_config": "b", "wall_seconds": 5.0, "train_seconds": 2.0},
        )
    )
    spec = type(
        "Spec",
        (),
        {
            "tuning": SubsetTuning(top_k=2, seeds=1, data_fraction=0.5, epochs_fraction=1.0),
            "directions": ["minimize", "maximize"],
        },
    )()
    assert budget.reserve(spec, study.get_trials()) == 7 + 2 * 7  # no pick yet: each at the baseline's
    study.add_trial(
        optuna.trial.create_trial(
            values=[30.0, 0.9], user_attrs={"full_config": "slow", "wall_seconds": 50.0, "train_seconds": 40.0}
        )
    )
    assert budget.reserve(spec, study.get_trials()) == 7 + 90 + 7


@pytest.mark.research
def test_phase1_fidelity_ranks_phase_1_thresholds_against_the_full_data(tmp_path, scripted, capsys, monkeypatch):
    """research/phase1_fidelity.py on a finished two-phase study: the confirmed configurations,
    the baseline and a sample trained on the full data; a second call reuses the sample's runs."""
    import sys

    from research import phase1_fidelity as mod

    tuning = {
        "name": "subset",
        "data_fraction": 0.25,
        "epochs_fraction": 0.5,
        "target_accuracy": 0.5,
        "top_k": 2,
        "seeds": 1,
    }
    path = write(tmp_path, n_trials=8, tuning=tuning)
    assert main(["run", str(path)]) == 0
    capsys.readouterr()
    calls = []
    # The script trains its configurations itself (not trials of a study): its trainer is replaced.
    monkeypatch.setattr(trainer_run, "train", lambda cfg, **kw: calls.append(cfg) or scripted_train(cfg, **kw))
    runs = tmp_path / "runs.jsonl"
    monkeypatch.setattr(
        sys, "argv", ["x", str(path), "--sample", "3", "--out", str(runs), "--thresholds", "0.3,0.5,0.99"]
    )
    mod.main()
    out = capsys.readouterr().out
    assert len(calls) == 3 and all(c.dataset.data_fraction == 1.0 for c in calls)  # full data, not phase 1's
    assert len(runs.read_text().splitlines()) == 3
    # The baseline, 2 confirmed, 3 sampled; the scripted curves rise with the lr on both data sizes.
    assert re.search(r"6 configurations on the full data \(\d miss 0.6\); phase 1's target 0.5", out), out
    rows = {line.split()[0]: line.split(None, 2) for line in out.splitlines() if line.strip().startswith("0.")}
    assert rows["0.300"][1] == "6/6" and float(rows["0.300"][2]) > 0
    assert rows["0.990"][1:] == ["0/6", "n/a (all tied)"]
    monkeypatch.setattr(sys, "argv", ["x", str(path), "--out", str(runs)])
    mod.main()  # the sample again, from the file: nothing trained
    assert len(calls) == 3 and "6 configurations" in capsys.readouterr().out


def test_compare_configs_measures_recipes_over_seeds_and_counts_a_miss(tmp_path, capsys, monkeypatch):
    """benchmarks/compare_configs.py --seeds: every round trains both configs with each seed
    (alternating A, B); a run that missed the target counts as slower than any hit, not dropped."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "compare_configs", Path(__file__).resolve().parents[2] / "benchmarks" / "compare_configs.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    for path, lr in ((a, 0.1), (b, 0.15)):  # the scripted curve rises to a ceiling set by the lr
        path.write_text(
            TrainConfig.from_dict(
                tiny(**{"epochs": 4, "eval_every": 0.5, "target_accuracy": 0.6, "seed": 7, "optimizer.lr": lr})
            ).to_yaml()
        )
    calls = []

    def train(cfg, **kw):  # B misses with seed 2: its ceiling falls below the target
        calls.append((cfg.optimizer.lr, cfg.seed))
        if cfg.optimizer.lr == 0.15 and cfg.seed == 2:
            cfg = cfg.replace(**{"optimizer.lr": 0.01})
        return scripted_train(cfg, **kw)

    monkeypatch.setattr(trainer_run, "train", train)  # the script trains configurations itself, no study
    monkeypatch.setattr(sys, "argv", ["x", str(a), str(b), "--rounds", "1", "--seeds", "0,1"])
    mod.main()
    out = capsys.readouterr().out
    assert calls == [(0.1, 0), (0.15, 0), (0.1, 1), (0.15, 1)]  # A, B alternate; both get each seed
    assert "round 1 seed 1 B (b.yaml)" in out and "missed" not in out
    assert re.search(r"^speedup=\d", out, re.M), out
    assert re.search(r"^speedup_paired=\d.* \(the median of 2 same-seed ratios\)", out, re.M), out
    calls.clear()
    monkeypatch.setattr(sys, "argv", ["x", str(a), str(b), "--rounds", "1", "--seeds", "1,2,2"])
    mod.main()
    out = capsys.readouterr().out
    # B: one hit and two misses: its median is a miss, so there is no speed-up to print.
    assert "(2 of 3 runs missed it)" in out and "speedup=n/a" in out, out
    assert "speedup_paired=0.00 (the median of 3" in out, out  # B's misses are slower than A's hits
    monkeypatch.setattr(sys, "argv", ["x", str(a), str(b), "--seeds", "one"])
    with pytest.raises(SystemExit) as e:
        mod.main()
    assert e.value.code == 2 and "--seeds" in capsys.readouterr().err
