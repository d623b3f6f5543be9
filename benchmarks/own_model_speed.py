"""Your own model costs what a built-in does: the tiny CNN, once by its built-in name and once as
a plain nn.Module through an import path, trained alike, per step.

B is the built-in's own layers (``nn.Sequential(features, linear)``) named by import path, so
the only difference is the path a user's model takes: the import, the probe and the check on a
batch of two (set-up, not timed as training), no CORDS interface, no padding wrapper. Runs
alternate (A B A B ...) in one process so drift hits both. Last line: ``ratio=X``, the median
of per-pair ratios import path / built-in of train seconds per step (1.00: no difference).

    EFFSEARCH_DATA_DIR=../shared/data uv run python benchmarks/own_model_speed.py
    uv run python benchmarks/own_model_speed.py --dataset digits      # no data folder needed
"""

from __future__ import annotations

import argparse
import statistics

import torch.nn as nn

from effsearch.config import TrainConfig
from effsearch.trainer.models import tiny_cnn
from effsearch.trainer.training import train


def tiny(num_classes: int, in_channels: int, width: int = 0) -> nn.Module:
    """The built-in tiny CNN's layers as a plain module (what a user's own model looks like)."""
    c = tiny_cnn(in_channels, num_classes, width)
    return nn.Sequential(c.features, c.linear)


def recipe(dataset: str, model: str, epochs: float) -> dict:
    return {
        "dataset": {"name": dataset, "data_fraction": 8000 / 54000 if dataset == "fashion-mnist" else 1.0},
        "model": {"name": model, "width": 16},
        "epochs": epochs,
        "batch_size": 128,
        "optimizer": {"name": "sgd", "lr": 0.05},
        "schedule": {"name": "cosine"},
        "eval_every": epochs,  # one evaluation, at the end (not train time)
        "device": "cpu",
        "target_accuracy": 0.0,
    }


def per_step(cfg: TrainConfig) -> float:
    r = train(cfg, progress=False, test=False)
    return r.final.train_seconds / r.final.steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="fashion-mnist", choices=("fashion-mnist", "digits"))
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--epochs", type=float, default=2)
    args = p.parse_args()
    a = TrainConfig.from_dict(recipe(args.dataset, "tiny-cnn", args.epochs))
    b = TrainConfig.from_dict(recipe(args.dataset, "benchmarks.own_model_speed:tiny", args.epochs))
    per_step(a)  # warm-up: the first run of a process pays for imports and first calls
    ratios = []
    for i in range(args.pairs):
        ta, tb = per_step(a), per_step(b)
        ratios.append(tb / ta)
        print(
            f"pair {i}: built-in {ta * 1e3:.2f} ms/step  import path {tb * 1e3:.2f} ms/step  ratio {tb / ta:.3f}",
            flush=True,
        )
    print(
        f"ratio={statistics.median(ratios):.3f} (median of {args.pairs} pairs; min {min(ratios):.3f}, "
        f"max {max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
