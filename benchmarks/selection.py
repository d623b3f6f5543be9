"""CORDS data-subset selection against full data, same epochs, one process.

Fashion-MNIST (10k training images, 1.2k validation images for GLISTER and
the run's own evaluation), tiny CNN, CPU. For each fraction, every strategy
trains for the same number of epochs as the full-data run; an epoch of a
subset run is ``ceil(fraction * N / batch)`` batches. Reported per run: train
seconds (selection included), selection seconds alone, test accuracy (10k
test images), speed-up over full data and the accuracy difference in points.
Runs go one after another in a single process, the full-data run first and
again last (speed-ups are against the mean of the two, which also shows the
drift); the load average is printed because other work on the machine moves
the timings.

    EFFSEARCH_DATA_DIR=../shared/data uv run python benchmarks/selection.py [--epochs 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from effsearch.config import TrainConfig
from effsearch.trainer.training import train

FASHION_TRAIN = 60_000


def base_config(train_size: int, val_size: int, epochs: int) -> dict:
    val_fraction = val_size / FASHION_TRAIN
    return {
        "dataset": {
            "name": "fashion-mnist",
            "val_fraction": val_fraction,
            "data_fraction": train_size / (FASHION_TRAIN - val_size),
            "crop_padding": 2,
        },
        "model": {"name": "tiny-cnn", "width": 16},
        "epochs": epochs,
        "batch_size": 128,
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4},
        "schedule": {"name": "cosine"},
        "eval_every": epochs,
        "device": "cpu",
        "seed": 0,
    }


def run(cfg_dict: dict) -> dict:
    cfg = TrainConfig.from_dict(cfg_dict)
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    r = train(cfg, progress=False)
    wall = time.perf_counter() - t
    last = r.history[-1].to_dict() if r.history else {}
    return {
        "strategy": cfg.selection.strategy,
        "fraction": cfg.selection.fraction,
        "status": r.status,
        "train_seconds": r.final.train_seconds,
        "selection_seconds": r.final.selection_seconds or 0.0,
        "test_accuracy": r.final.test_accuracy,
        "val_accuracy": r.final.val_accuracy,
        "subset_size": last.get("subset_size"),
        "selections": last.get("selections"),
        "samples_seen": last.get("samples_seen"),
        "wall_seconds": wall,
        "load_avg_start": load0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-size", type=int, default=10_000)
    ap.add_argument("--val-size", type=int, default=1_200)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--select-every", type=int, default=3)
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.3])
    ap.add_argument(
        "--strategies", nargs="+", default=["random", "random-online", "glister", "craig-pb", "gradmatch-pb"]
    )
    ap.add_argument("--json", help="also write all results here")
    args = ap.parse_args()

    base = base_config(args.train_size, args.val_size, args.epochs)
    results = [run(base)]
    print(
        f"full: {results[0]['train_seconds']:.1f}s acc {results[0]['test_accuracy']:.4f} "
        f"(load {results[0]['load_avg_start']:.1f})",
        flush=True,
    )
    for fraction in args.fractions:
        for strategy in args.strategies:
            d = json.loads(json.dumps(base))
            d["selection"] = {"strategy": strategy, "fraction": fraction, "select_every": args.select_every}
            r = run(d)
            results.append(r)
            print(
                f"{strategy} {fraction}: {r['train_seconds']:.1f}s (selection {r['selection_seconds']:.1f}s) "
                f"acc {r['test_accuracy']:.4f} subset {r['subset_size']} (load {r['load_avg_start']:.1f})",
                flush=True,
            )

    results.append(run(base))
    fulls = [r for r in results if r["strategy"] == "full"]
    print(
        f"full again: {fulls[1]['train_seconds']:.1f}s acc {fulls[1]['test_accuracy']:.4f} "
        f"(load {fulls[1]['load_avg_start']:.1f})",
        flush=True,
    )
    full = {
        "train_seconds": sum(r["train_seconds"] for r in fulls) / len(fulls),
        "test_accuracy": sum(r["test_accuracy"] for r in fulls) / len(fulls),
    }

    print()
    print("| strategy | fraction | train s | selection s | test acc | speed-up | Δ acc (points) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        speed = full["train_seconds"] / r["train_seconds"]
        delta = 100 * (r["test_accuracy"] - full["test_accuracy"])
        print(
            f"| {r['strategy']} | {r['fraction']:g} | {r['train_seconds']:.1f} | {r['selection_seconds']:.1f} | "
            f"{r['test_accuracy']:.4f} | {speed:.2f}x | {delta:+.2f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "config": base, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
