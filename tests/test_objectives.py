"""Objectives are pure functions of a RunResult: no training here."""

import pytest

from effsearch import objectives as O
from effsearch.config import ConfigError
from effsearch.trainer.result import RunResult, time_to_target


def result(accs, seconds=None, target=0.9, **final):
    seconds = seconds or [float(i + 1) for i in range(len(accs))]
    history = [{"epoch": i + 1, "samples_seen": 0, "train_seconds": s, "val_accuracy": a, "val_loss": 1.0}
               for i, (a, s) in enumerate(zip(accs, seconds))]
    r = RunResult(status="completed", config={}, history=history, target_accuracy=target,
                  final={"val_accuracy": accs[-1], "train_seconds": seconds[-1], "nonzero_param_bytes": 4000,
                         "test_accuracy": 0.5, **final})
    r.time_to_target = time_to_target(history, target)
    return r


def test_time_to_accuracy_is_the_first_time_at_target():
    r = result([0.5, 0.92, 0.95], seconds=[1.0, 2.5, 4.0])
    assert O.time_to_accuracy(r) == 2.5
    assert r.reached_target


def test_a_miss_never_beats_a_hit_and_closer_misses_rank_better():
    slow_hit = result([0.1] * 50 + [0.91], seconds=[1000.0 * (i + 1) for i in range(51)])  # 14 hours
    near_miss = result([0.5, 0.89])
    far_miss = result([0.2, 0.3])
    assert not near_miss.reached_target
    hit = O.time_to_accuracy(slow_hit)
    near, far = O.time_to_accuracy(near_miss), O.time_to_accuracy(far_miss)
    assert hit < O.MISS_PENALTY_SECONDS <= near < far <= 2 * O.MISS_PENALTY_SECONDS
    assert near == O.miss_penalty(0.89)
    assert O.miss_penalty(float("nan")) == 2 * O.MISS_PENALTY_SECONDS  # finite even without any evaluation


def test_other_objectives_and_directions():
    r = result([0.5, 0.95])
    assert O.final_accuracy(r) == 0.95
    assert O.train_time(r) == 2.0
    assert O.model_size(r) == 4000
    names = O.check(["time_to_accuracy", "final_accuracy", "model_size"])
    assert O.directions(names) == ["minimize", "maximize", "minimize"]
    assert O.values(r, names) == [O.time_to_accuracy(r), 0.95, 4000.0]


@pytest.mark.parametrize("names, field, words", [
    (["time_to_accuracy", "speed"], "objectives[1]", "allowed: time_to_accuracy, final_accuracy"),
    (["test_accuracy"], "objectives[0]", "never optimised"),
    ([], "objectives", "non-empty"),
    (["final_accuracy", "final_accuracy"], "objectives", "twice"),
])
def test_bad_objective_names(names, field, words):
    with pytest.raises(ConfigError) as e:
        O.check(names)
    assert e.value.field == field and words in e.value.message
