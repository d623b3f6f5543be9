"""Trainer overhead: effsearch's trainer vs a plain PyTorch loop, same work.

Tiny CNN, 8k Fashion-MNIST training images, 2 epochs, no algorithms. Both use
the same in-memory tensors, model, optimizer, per-batch lr schedule and batch
augmentation; runs alternate (A B A B ...) so drift hits both. Timed: the whole
training call (model build included) minus evaluation. Last line: ratio=X
(median of per-pair ratios effsearch / plain).

    EFFSEARCH_DATA_DIR=../shared/data uv run python benchmarks/trainer_overhead.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

from effsearch.config import TrainConfig
from effsearch.trainer import data as D
from effsearch.trainer.models import build_model
from effsearch.trainer.run import train

CONFIG = {
    "dataset": {"name": "fashion-mnist", "data_fraction": 8000 / 54000, "crop_padding": 2},
    "model": {"name": "tiny-cnn"},
    "epochs": 2,
    "batch_size": 128,
    "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4},
    "schedule": {"name": "cosine"},
    "eval_every": 2,
    "device": "cpu",
}


def plain_loop(cfg: TrainConfig, splits: D.Splits) -> float:
    t = time.perf_counter()
    torch.manual_seed(cfg.seed)
    model = build_model("tiny-cnn", splits.channels, splits.num_classes)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.optimizer.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    n = len(splits.train_y)
    steps = cfg.epochs * math.ceil(n / cfg.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    aug = D.BatchAugment(splits.mean, splits.std, "cpu", flip=False, crop_padding=2, train=True)
    model.train()
    for _ in range(int(cfg.epochs)):
        perm = torch.randperm(n)
        for i in range(0, n, cfg.batch_size):
            idx = perm[i:i + cfg.batch_size]
            x, y = aug((splits.train_x[idx], splits.train_y[idx]))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    return time.perf_counter() - t


def effsearch_run(cfg: TrainConfig) -> tuple[float, float]:
    t = time.perf_counter()
    r = train(cfg, progress=False)
    wall = time.perf_counter() - t
    f = r.final
    return wall - f["eval_seconds"] - f["final_eval_seconds"] - f["data_seconds"], f["train_seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    cfg = TrainConfig.from_dict(CONFIG)
    splits = D.load_splits(cfg)
    print(f"{len(splits.train_y)} training images, {cfg.epochs:g} epochs, batch {cfg.batch_size}, "
          f"{torch.get_num_threads()} threads")
    plain_loop(cfg, splits)  # warm-up: first-touch allocations, lazy imports
    effsearch_run(cfg)
    ratios, ratios_loop = [], []
    for i in range(args.repeats):
        a, a_loop = effsearch_run(cfg)
        b = plain_loop(cfg, splits)
        ratios.append(a / b)
        ratios_loop.append(a_loop / b)
        print(f"repeat {i + 1}: effsearch {a:.2f}s (train_seconds {a_loop:.2f}s)  plain {b:.2f}s  "
              f"ratio {a / b:.3f}", flush=True)
    print(f"median ratio, train_seconds only: {statistics.median(ratios_loop):.3f}")
    print(f"ratio={statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
