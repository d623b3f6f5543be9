"""Named starting recipes: published fast-training habits, written as changes to a study's base.

A recipe is relative to the base (batch x4 of the base's batch, the base's lr scaled), so it
adapts to the user's model and data. A study queues the ones it names as warm starts
(``warm_start: [recipe:one-cycle, ...]``, or ``recipes`` for every one), right after the
baseline, trained as given; a recipe the rules or the machine refuse for this base (bf16 on
a CPU, an algorithm the model cannot take) is skipped with a note, not a failure. The fastest
recipe that reaches the target is the yardstick a search must beat (``queries.best_recipe``):
a speed-up over a weak baseline says little.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from effsearch.config import ConfigError, TrainConfig

PREFIX = "recipe:"
ALL = "recipes"  # in warm_start: every recipe that fits the base


@dataclass(frozen=True)
class Recipe:
    name: str
    changes: Callable[[TrainConfig], dict]  # dotted overrides of the base
    source: str
    helps: str  # when it helps, in a line


def _scaled_lr(b: TrainConfig, factor: float) -> float:
    return min(10.0, b.optimizer.lr * factor)


def _large_batch(b: TrainConfig) -> dict:
    return {
        "batch_size": b.batch_size * 4,
        "optimizer.lr": _scaled_lr(b, 4),
        "schedule.warmup_fraction": max(b.schedule.warmup_fraction, 0.05),
        "algorithms": {**b.algorithms, "label_smoothing": {"smoothing": 0.1}},
    }


def _small_batch(b: TrainConfig) -> dict:
    # The lr each step trains with is kept: where the base scales its lr with the batch, the searched
    # value doubles as the batch halves.
    lr = _scaled_lr(b, 2) if b.optimizer.scale_lr_with_batch else b.optimizer.lr
    return {"batch_size": max(1, b.batch_size // 2), "optimizer.lr": lr, "epochs": b.epochs * 2 / 3}


def _one_cycle(b: TrainConfig) -> dict:
    return {
        "schedule.name": "onecycle",
        "schedule.warmup_fraction": 0.25,
        "optimizer.name": "sgd",
        "optimizer.momentum": 0.9,
        "optimizer.nesterov": True,
    }


def _label_smoothing(b: TrainConfig) -> dict:
    return {"algorithms": {**b.algorithms, "label_smoothing": {"smoothing": 0.1}}}


def _half_budget(b: TrainConfig) -> dict:
    return {"epochs": b.epochs / 2, "schedule.name": "linear", "schedule.warmup_fraction": 0.0}


def _bf16(b: TrainConfig) -> dict:
    return {"precision": "amp_bf16", "channels_last": True}


def _composer_mild(b: TrainConfig) -> dict:
    return {
        "algorithms": {
            **b.algorithms,
            "blurpool": {},
            "label_smoothing": {"smoothing": 0.08},
            "progressive_resizing": {"initial_scale": 0.5, "finetune_fraction": 0.2},
        }
    }


def _fast_cnn(b: TrainConfig) -> dict:
    return {
        "batch_size": b.batch_size * 4,
        "optimizer.lr": _scaled_lr(b, 4),
        "optimizer.nesterov": True,
        "schedule.name": "onecycle",
        "schedule.warmup_fraction": 0.2,
        "epochs": b.epochs * 0.6,
        "algorithms": {**b.algorithms, "label_smoothing": {"smoothing": 0.2}},
    }


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "large-batch",
            _large_batch,
            "Goyal et al. 2017, Accurate, Large Minibatch SGD (linear lr scaling, warm-up); label smoothing from "
            "He et al. 2019, Bag of Tricks",
            "a GPU the base's batch leaves idle: 4x the batch, 4x the lr, a short warm-up",
        ),
        Recipe(
            "small-batch",
            _small_batch,
            "Masters and Luschi 2018, Revisiting Small Batch Training for Deep Neural Networks; Keskar et al. "
            "2017, On Large-Batch Training (small batches reach an accuracy in fewer epochs)",
            "a CPU or a small net, where a step costs about its batch: half the batch (twice the steps an "
            "epoch, the same lr a step), two thirds of the epochs",
        ),
        Recipe(
            "one-cycle",
            _one_cycle,
            "Smith and Topin 2019, Super-Convergence; Page 2018, cifar10-fast (DAWNBench)",
            "short budgets: a ramp up then a linear decay, with Nesterov momentum",
        ),
        Recipe(
            "label-smoothing",
            _label_smoothing,
            "Szegedy et al. 2016, Rethinking the Inception Architecture",
            "an over-confident net: soft targets (0.1) often reach an accuracy sooner",
        ),
        Recipe(
            "half-budget",
            _half_budget,
            "Li, Yumer and Ramanan 2020, Budgeted Training (a linear decay to zero over the budget)",
            "a base that trains longer than the target needs: half the epochs, lr decayed to zero by the end",
        ),
        Recipe(
            "bf16-channels-last",
            _bf16,
            "Micikevicius et al. 2018, Mixed Precision Training; Composer's ChannelsLast method card",
            "a GPU with bf16 tensor cores (skipped on a CPU)",
        ),
        Recipe(
            "composer-mild",
            _composer_mild,
            "MosaicML Composer's ResNet 'mild' recipe (BlurPool, label smoothing, progressive resizing)",
            "ResNet-like CNNs on images of 32 px and more",
        ),
        Recipe(
            "fast-cnn",
            _fast_cnn,
            "Jordan 2024, airbench (large batch, Nesterov, label smoothing 0.2, a short one-cycle budget)",
            "small image classifiers: 4x the batch and lr, 0.6 of the epochs, label smoothing 0.2",
        ),
    )
}


def names(entry: str, field: str) -> list[str]:
    """The recipe names a warm_start entry asks for (``recipe:NAME`` or ``recipes``)."""
    if entry == ALL:
        return list(RECIPES)
    name = entry[len(PREFIX) :]
    if name not in RECIPES:
        raise ConfigError(
            field,
            f"unknown recipe {name!r}; recipes: {', '.join(RECIPES)} "
            f"(`effsearch recipes` lists them), or `{ALL}` for all",
        )
    return [name]


def is_recipe(entry: object) -> bool:
    return isinstance(entry, str) and (entry == ALL or entry.startswith(PREFIX))


def table() -> str:
    """What `effsearch recipes` prints."""
    lines = []
    for r in RECIPES.values():
        lines += [f"{PREFIX}{r.name}", f"  helps: {r.helps}", f"  source: {r.source}", ""]
    lines.append(
        f"in a study file: warm_start: [{PREFIX}one-cycle, ...], or warm_start: [{ALL}] for every one that "
        "fits the base; each is a change to the study's base, trained right after the baseline"
    )
    return "\n".join(lines)
