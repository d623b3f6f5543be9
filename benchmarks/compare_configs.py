"""Time two TrainConfigs side by side: time to target and accuracies (a loss target: val loss and
bits per byte), alternating runs.

A study measures each trial once, under whatever else the machine was doing; this
re-measures a chosen config against the baseline in one process, alternating
A, B, A, B, ... so slow drifts of the machine hit both alike. Prints each run,
the medians, ``speedup_paired=`` (the median of each run's ratio to its partner, a miss
slower than any hit) and ``speedup=X`` (median time to target of A / of B) last.

``--seeds 0,1,2`` measures the recipes, not one seed of each: every round trains both
configs with each of those seeds (A and B share the seed), and the medians are over all.
A pick's time to target crosses its target at an evaluation, so one seed can be an epoch
early or late (run 8's pick: 6.1 s with seed 1, 8.3 s with seed 0, same recipe).

    EFFSEARCH_DATA_DIR=../shared/data uv run python benchmarks/compare_configs.py \\
        docs/results/fashion-mnist-baseline.yaml docs/results/run2-fashion-mnist-best.yaml --rounds 3
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path, help="the reference config (e.g. the baseline)")
    ap.add_argument("b", type=Path, help="the config to compare (e.g. an exported best.yaml)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data-dir")
    ap.add_argument(
        "--seeds",
        help="comma-separated seeds: each round trains both configs with each (default: each config's own seed)",
    )
    ap.add_argument(
        "--eval-every",
        type=float,
        help="epochs between evaluations, for both configs (default: each config's own). Time "
        "to target is read at evaluations: at 1 epoch a run is credited with the end of "
        "the epoch it crossed in, up to a whole epoch late",
    )
    args = ap.parse_args()
    from effsearch.config import TrainConfig
    from effsearch.config.metrics import ACCURACY, target_of
    from effsearch.trainer.training import train

    cfgs = {"A": TrainConfig.from_yaml(args.a), "B": TrainConfig.from_yaml(args.b)}
    if args.eval_every:
        cfgs = {k: c.replace(eval_every=args.eval_every) for k, c in cfgs.items()}
    try:
        seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [None]
    except ValueError:
        ap.error(f"--seeds: comma-separated integers, e.g. 0,1,2; got {args.seeds!r}")
    runs: dict[str, list] = {"A": [], "B": []}
    # An accuracy target: val and test accuracy; a loss target (a language model): val loss and bits per byte.
    target = target_of(cfgs["A"])
    accuracy = target.metric == ACCURACY
    names = ("val", "test") if accuracy else ("val_loss", "val_bpb")
    said = f"{target.value:g}" if accuracy else target.text()

    def scores(f):
        return (f.val_accuracy, f.test_accuracy) if accuracy else (f.val_loss, f.val_bpb)

    for r in range(args.rounds):
        for seed in seeds:
            for key, cfg in cfgs.items():
                if seed is not None:
                    cfg = cfg.replace(seed=seed)
                res = train(cfg, data_root=args.data_dir, progress=False)
                f = res.final
                runs[key].append((res.time_to_target, f.train_seconds, *scores(f)))
                tta = f"{res.time_to_target:.1f}s" if res.time_to_target is not None else "missed"
                print(
                    f"round {r + 1}{'' if seed is None else f' seed {seed}'} {key} "
                    f"({[args.a, args.b][key == 'B'].name}): time to {said} "
                    f"{tta}, train {f.train_seconds:.1f}s, {names[0]} {runs[key][-1][2]:.4f}, "
                    f"{names[1]} {runs[key][-1][3]:.4f}",
                    flush=True,
                )

    def value(run, i):
        # A run that missed the target counts as slower than any that reached it, not left out.
        return math.inf if run[i] is None else run[i]

    def med(key, i):
        m = statistics.median([value(x, i) for x in runs[key]])
        return None if math.isinf(m) else m

    for key, path in (("A", args.a), ("B", args.b)):
        tta = med(key, 0)
        missed = sum(1 for x in runs[key] if x[0] is None)
        print(
            f"{key} {path}: median time to target {tta if tta is None else round(tta, 1)} s"
            f"{f' ({missed} of {len(runs[key])} runs missed it)' if missed else ''}, train "
            f"{med(key, 1):.1f} s, {names[0]} {med(key, 2):.4f}, {names[1]} {med(key, 3):.4f}"
        )
    a, b = med("A", 0), med("B", 0)
    if accuracy:
        print(f"test_accuracy_delta={med('B', 3) - med('A', 3):+.4f}")
    else:
        print(f"val_loss_delta={med('B', 2) - med('A', 2):+.4f}")
    # Each run's ratio to its partner (same round, same seed), then the median: with --seeds the
    # ratio of medians can pair one config's fast seed with the other's slow one (run 8's pick
    # over seeds 0-2: 3.30x that way, 2.93x paired).
    both = [(value(p, 0), value(q, 0)) for p, q in zip(runs["A"], runs["B"])]
    pairs = [x / y for x, y in both if not (math.isinf(x) and math.isinf(y))]  # inf / inf: no ratio
    print(
        f"speedup_paired={statistics.median(pairs):.2f} (the median of {len(pairs)} same-seed ratios)"
        if pairs
        else "speedup_paired=n/a (both configs missed the target in every pair)"
    )
    print(f"speedup={a / b:.2f}" if a and b else "speedup=n/a (a config missed the target)")


if __name__ == "__main__":
    main()
