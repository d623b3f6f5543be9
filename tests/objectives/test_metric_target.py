"""A target on any metric: its direction read once (config/metrics.py), by the config's checks,
the trainer's crossing, the objectives' constraint and the pruner's rungs."""

import math

import optuna
import pytest

from effsearch import objectives as O
from effsearch.config import ConfigError, TrainConfig
from effsearch.config.metrics import Target, target_of
from effsearch.search.pruners import MOASHAPruner, RungTracker
from effsearch.trainer.result import EvalPoint, Final, RunResult, time_to_target
from tests.support.helpers import tiny


def losses(*values):
    return [
        EvalPoint(epoch=i + 1, train_seconds=float(i + 1), val_accuracy=0.0, val_loss=v) for i, v in enumerate(values)
    ]


def test_target_accuracy_is_still_the_default_target():
    cfg = TrainConfig.from_dict(tiny(target_accuracy=0.7))
    assert target_of(cfg) == Target("val_accuracy", 0.7)
    assert target_of(TrainConfig.from_dict(tiny(**{"target.metric": "val_loss", "target.value": 2.0}))) == Target(
        "val_loss", 2.0
    )


def test_a_loss_is_crossed_at_the_first_evaluation_at_or_below_it():
    history = losses(3.0, 2.5, 2.0, 1.5)
    t = Target("val_loss", 2.0)
    assert time_to_target(history, t) == 3.0  # 2.0 <= 2.0: reached exactly at the target
    assert time_to_target(history, Target("val_loss", 2.4)) == 3.0
    assert time_to_target(history, Target("val_loss", 1.0)) is None
    assert time_to_target(history, t, final_value=2.1) is None  # the delivered model misses it
    assert time_to_target(history, t, final_value=float("nan")) is None
    # An accuracy still rises to its target.
    assert time_to_target([EvalPoint(epoch=1, train_seconds=1.0, val_accuracy=0.9)], 0.9) == 1.0


def _loss_result(final_loss, tta):
    return RunResult(
        status="completed",
        config={},
        history=losses(3.0, final_loss),
        final=Final(val_loss=final_loss, train_seconds=2.0),
        target_accuracy=2.0,
        target_metric="val_loss",
        time_to_target=tta,
    )


def test_a_loss_miss_is_infeasible_by_how_far_above_the_target_it_ended():
    names = ["time_to_target", "final_val_loss"]
    assert O.directions(names) == ["minimize", "minimize"]
    assert O.constraints(_loss_result(1.9, 2.0), names) == [0.0]
    near, far = (O.constraints(_loss_result(v, None), names)[0] for v in (2.1, 2.9))
    assert near == pytest.approx(0.1) and 0 < near < far
    assert O.values(_loss_result(1.9, 2.0), names) == [2.0, 1.9]
    assert O.constraints(_loss_result(2.1, None), ["final_val_loss"]) == []


@pytest.mark.parametrize(
    "overrides,field,words",
    [
        ({"target.metric": "val_perplexity", "target.value": 2.0}, "target.metric", "val_loss"),
        ({"target.metric": "val_loss", "target.value": 0.0}, "target.value", "above 0"),
        ({"target.metric": "val_loss", "target.value": -1.0}, "target.value", "above 0"),
        ({"target.metric": "val_bpb", "target.value": 0.0}, "target.value", "above 0"),
        ({"target.metric": "val_accuracy", "target.value": 1.5}, "target.value", "[0, 1]"),
        ({"target.metric": "val_loss"}, "target.value", "needs a value"),
    ],
)
def test_a_bad_target_names_its_field(overrides, field, words):
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(tiny(**overrides))
    assert e.value.field == field and words in str(e.value)


def test_the_pruner_ranks_a_loss_lower_is_better():
    """At a rung, the trial with the higher loss is the one pruned; a loss target's crossing is
    ``<=`` (the rung point says reached)."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    pruner = MOASHAPruner(eta=2, min_fraction=0.25, min_trials=2, rank="spent")
    target = Target("val_loss", 2.0)

    def at_rung(loss):
        t = study.ask()
        point = EvalPoint(epoch=1, train_seconds=10.0, val_accuracy=0.0, val_loss=loss)
        return t, RungTracker(pruner, study, t, 4, target)(point)

    good, verdict = at_rung(1.9)
    assert verdict is None
    assert study.trials[good.number].user_attrs["rung_0"] == [10.0, -1.9, True]
    _, verdict = at_rung(2.6)
    assert verdict and "val loss 2.6000" in verdict
    _, verdict = at_rung(1.8)  # better than both: kept
    assert verdict is None


def test_an_unmeasured_loss_ranks_last():
    tracker = RungTracker(MOASHAPruner(), None, None, 4, Target("val_loss", 2.0))
    assert tracker._score(EvalPoint(epoch=1, train_seconds=1.0, val_accuracy=0.0)) == -math.inf


def test_a_relative_target_moves_in_the_metric_s_direction():
    """Within a point of the baseline: an accuracy a point below its final value, a loss 0.01 above."""
    assert Target("val_accuracy", 0.0).relative(0.9, -0.01).value == pytest.approx(0.89)
    assert Target("val_loss", 0.0).relative(2.0, -0.01).value == pytest.approx(2.01)
    assert Target("val_accuracy", 0.0).relative(0.995, 0.01).value == 1.0  # an accuracy stays in [0, 1]
