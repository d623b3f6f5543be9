"""Objectives are pure functions of a RunResult: no training here."""

import pytest

from effsearch import objectives as O
from effsearch.config import ConfigError
from effsearch.trainer.result import RunResult, time_to_target


def result(accs, seconds=None, target=0.9, **final):
    seconds = seconds or [float(i + 1) for i in range(len(accs))]
    history = [
        {"epoch": i + 1, "samples_seen": 0, "train_seconds": s, "val_accuracy": a, "val_loss": 1.0}
        for i, (a, s) in enumerate(zip(accs, seconds))
    ]
    r = RunResult(
        status="completed",
        config={},
        history=history,
        target_accuracy=target,
        final={
            "val_accuracy": accs[-1],
            "train_seconds": seconds[-1],
            "nonzero_param_bytes": 4000,
            "test_accuracy": 0.5,
            **final,
        },
    )
    r.time_to_target = time_to_target(r.history, target)
    return r


def test_time_to_accuracy_is_the_first_time_at_target():
    r = result([0.5, 0.92, 0.95], seconds=[1.0, 2.5, 4.0])
    assert O.time_to_accuracy(r) == 2.5
    assert r.reached_target


def test_a_miss_stores_real_seconds_and_is_infeasible_by_its_shortfall():
    slow_hit = result([0.1] * 50 + [0.91], seconds=[1000.0 * (i + 1) for i in range(51)])  # 14 hours
    near_miss = result([0.5, 0.89])
    far_miss = result([0.2, 0.3])
    assert not near_miss.reached_target
    # No penalty that looks like a time: a miss keeps the seconds it trained...
    assert O.time_to_accuracy(slow_hit) == 51000.0 and O.time_to_accuracy(near_miss) == 2.0
    # ...and the constraint makes it infeasible (Optuna ranks every hit first, misses by shortfall).
    names = ["time_to_accuracy", "final_accuracy"]
    assert O.constraints(slow_hit, names) == [0.0]
    near, far = O.constraints(near_miss, names)[0], O.constraints(far_miss, names)[0]
    assert near == pytest.approx(0.01) and 0 < near < far
    assert O.constraints(near_miss, ["final_accuracy"]) == []  # no time objective: nothing to violate
    crossed_then_lost = result([0.95, 0.5])  # the delivered model misses: no time, however early it crossed
    crossed_then_lost.time_to_target = time_to_target(crossed_then_lost.history, 0.9, final_value=0.5)
    assert O.constraints(crossed_then_lost, names)[0] == pytest.approx(0.4)


def test_constrained_samplers_rank_every_hit_above_every_miss():
    import optuna
    from optuna.samplers.nsgaii._constraints_evaluation import _constrained_dominates
    from optuna.study import StudyDirection
    from optuna.trial import create_trial

    def trial(r):
        names = ["time_to_accuracy", "final_accuracy"]
        return create_trial(values=O.values(r, names), system_attrs={"constraints": O.constraints(r, names)})

    slow_hit, fast_miss = trial(result([0.5, 0.91], seconds=[500.0, 1000.0])), trial(result([0.89], seconds=[1.0]))
    dirs = [StudyDirection.MINIMIZE, StudyDirection.MAXIMIZE]
    assert _constrained_dominates(slow_hit, fast_miss, dirs) and not _constrained_dominates(fast_miss, slow_hit, dirs)
    study = optuna.create_study(directions=["minimize", "maximize"])
    study.add_trials([slow_hit, fast_miss])
    assert [t.values for t in study.best_trials] == [slow_hit.values]  # the miss is never on the front


def test_other_objectives_and_directions():
    r = result([0.5, 0.95])
    assert O.final_accuracy(r) == 0.95
    assert O.train_time(r) == 2.0
    assert O.model_size(r) == 4000
    names = O.check(["time_to_accuracy", "final_accuracy", "model_size"])
    assert O.directions(names) == ["minimize", "maximize", "minimize"]
    assert O.values(r, names) == [O.time_to_accuracy(r), 0.95, 4000.0]


@pytest.mark.parametrize(
    "names, field, words",
    [
        (["time_to_accuracy", "speed"], "objectives[1]", "allowed: time_to_accuracy, final_accuracy"),
        (["test_accuracy"], "objectives[0]", "never optimised"),
        ([], "objectives", "non-empty"),
        (["final_accuracy", "final_accuracy"], "objectives", "twice"),
    ],
)
def test_bad_objective_names(names, field, words):
    with pytest.raises(ConfigError) as e:
        O.check(names)
    assert e.value.field == field and words in e.value.message


def test_a_run_without_an_accuracy_or_seconds_is_a_full_miss():
    """A crashed run has no final accuracy (None) or a NaN one: its shortfall is the whole target;
    with no train seconds its stored time is 0, not some made-up penalty."""
    for acc in (None, float("nan")):
        r = RunResult(status="failed", config={}, target_accuracy=0.8, final={"val_accuracy": acc})
        assert O.miss_constraint(r) == pytest.approx(0.8)
        assert O.time_to_accuracy(r) == 0.0
    assert O.shortfall(0.95, True, 0.9) == 0.0 and O.shortfall(0.9, False, 0.9) == 1e-6  # a miss stays infeasible


def test_quantized_size_needs_the_int8_model():
    r = result([0.5, 0.95], quantized_bytes=1234)
    assert O.quantized_size(r) == 1234.0 and O.values(r, ["quantized_size"]) == [1234.0]
    with pytest.raises(ValueError) as e:
        O.quantized_size(result([0.5, 0.95]))
    assert str(e.value) == (
        "quantized_size needs quantize: int8 in the trial's config (no quantized_bytes in its result)"
    )
    assert O.NEEDS["quantized_size"] == ("quantize", "int8")


def test_a_missing_measurement_is_a_key_error_naming_it():
    r = RunResult(status="completed", config={}, final={"train_seconds": 2.0})
    with pytest.raises(KeyError) as e:
        O.final_accuracy(r)
    assert e.value.args == ("val_accuracy",)


def test_check_takes_one_name_and_names_the_file_in_every_error():
    assert O.check("final_accuracy") == ("final_accuracy",)
    assert O.check(("time_to_accuracy", "model_size")) == ("time_to_accuracy", "model_size")
    for names, words in (
        (None, "must be a non-empty list of: time_to_accuracy, final_accuracy, train_time"),
        (["test_accuracy"], "never optimised"),
        (["speed"], "unknown objective 'speed'"),
        (["train_time", "train_time"], "names an objective twice"),
    ):
        with pytest.raises(ConfigError) as e:
            O.check(names, field="space.objectives", source="s.yaml")
        assert e.value.source == "s.yaml" and words in e.value.message, e.value
        assert e.value.field.startswith("space.objectives")
