"""A run's checkpoints (trainer/checkpoint.py): a run resumed from any of its checkpoints goes on as
the uninterrupted run did (the same evaluation points, accuracies and losses), its clock counts
each training second once, and a run whose state lives elsewhere takes none and says why."""

import shutil

import pytest

from effsearch.config import TrainConfig
from effsearch.trainer.hooks import Checkpoints
from effsearch.trainer.training import train
from tests.support.helpers import tiny


def curve(result):
    return [(p.epoch, p.val_accuracy, p.val_loss, p.train_loss) for p in result.history]


def saved_run(cfg, tmp_path, every=1e-9):
    """``cfg`` trained with a checkpoint at every chance; (its result, [(facts, file)])."""
    kept = []

    def save(path, facts):
        dest = tmp_path / f"ckpt-{len(kept)}.pt"
        shutil.copy(path, dest)
        kept.append((facts, dest))

    return train(cfg, progress=False, checkpoints=Checkpoints(every=every, save=save)), kept


CONFIGS = {
    # eval_every 0.5: checkpoints mid-epoch (at the points) and at epoch ends
    "algorithms": {
        "eval_every": 0.5,
        "schedule": {"name": "cosine"},
        "dataset.crop_padding": 2,
        "dataset.flip": True,
        "algorithms": {"ema": {"half_life": "3ba"}, "label_smoothing": {}},
        "sparsity.target": 0.5,
        "optimizer.momentum": 0.9,
    },
    "sam": {"eval_every": 0.5, "algorithms": {"sam": {"interval": 2}}, "optimizer.momentum": 0.9},
    "accumulate": {"accumulate": 2, "eval_every": 0.5},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_run_resumed_from_any_checkpoint_goes_on_as_the_uninterrupted_run(tmp_path, name):
    cfg = TrainConfig.from_dict(tiny(**{"epochs": 2, "dataset.synthetic_size": 320, **CONFIGS[name]}))
    whole = train(cfg, progress=False)
    saving, kept = saved_run(cfg, tmp_path)
    assert curve(saving) == curve(whole)  # taking checkpoints changes nothing
    steps = 8 // cfg.accumulate  # optimizer steps an epoch (256 training images, batch 32)
    mid = [k for k in kept if k[0]["step"] % steps]
    ends = [k for k in kept if not k[0]["step"] % steps]
    assert mid and ends, kept
    for facts, path in (mid[-1], ends[0]):
        resumed = train(cfg, progress=False, checkpoints=Checkpoints(resume=path))
        assert curve(resumed) == curve(whole), facts
        assert resumed.final.val_accuracy == whole.final.val_accuracy
        assert resumed.final.extra["segments"] == 2 and resumed.final.extra["restore_seconds"] > 0
        assert resumed.final.steps == whole.final.steps


def test_the_clock_goes_on_from_the_checkpoint(tmp_path):
    """Train seconds are summed across segments: the points before the checkpoint keep their
    times, the later ones start from the checkpoint's; restoring is timed apart."""
    cfg = TrainConfig.from_dict(tiny(**{"epochs": 3, "eval_every": 0.5}))
    first, kept = saved_run(cfg, tmp_path)
    facts, path = kept[2]
    resumed = train(cfg, progress=False, checkpoints=Checkpoints(resume=path))
    before = [p for p in resumed.history if p.epoch <= facts["epoch"]]
    after = [p for p in resumed.history if p.epoch > facts["epoch"]]
    assert [p.train_seconds for p in before] == [p.train_seconds for p in first.history[: len(before)]]
    assert after and all(p.train_seconds > facts["train_seconds"] for p in after)
    restore = resumed.final.extra["restore_seconds"]
    # the second segment's own training: the total less the checkpoint's, no restore in it
    assert resumed.final.train_seconds - facts["train_seconds"] < first.final.train_seconds + restore


def test_a_run_whose_state_lives_elsewhere_takes_no_checkpoint_and_says_why(tmp_path):
    cfg = TrainConfig.from_dict(tiny(**{"selection.strategy": "random", "selection.fraction": 0.5}))
    result, kept = saved_run(cfg, tmp_path)
    assert kept == [] and "CORDS" in result.final.extra["checkpoint_skipped"]


def test_no_checkpoint_is_taken_before_every_seconds_of_training(tmp_path):
    cfg = TrainConfig.from_dict(tiny(**{"epochs": 3, "eval_every": 0.5}))
    result, kept = saved_run(cfg, tmp_path, every=3600.0)
    assert kept == [] and "checkpoints" not in result.final.extra
