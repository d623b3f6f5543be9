"""What scoring each evaluation point on as much of the validation set as its decision needs saves.

A study's trials are trained with ``settle`` (trainer/loop.py, ``score``): a point below the
target is scored on a shuffled prefix of the validation set until an upper bound of its accuracy
(Clopper-Pearson, 0.135% one-sided) is under the target; a rung's point until it is pruned even
at that bound. ``effsearch train`` scores every point whole. This times both on one config,
alternated (A B A B), and prints evaluation seconds, wall seconds, the points' images and the
time to target of each.

    EFFSEARCH_DATA_DIR=../shared/data uv run python benchmarks/settle_eval.py studies/fashion-mnist.yaml --phase tune --pairs 3
    uv run python benchmarks/settle_eval.py studies/quickstart.yaml --pairs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study")
    ap.add_argument(
        "--phase",
        choices=("tune", "confirm"),
        default="confirm",
        help="tune: the tuning phase's subset trial; confirm: the full-data baseline",
    )
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    from effsearch.config import ConfigError
    from effsearch.search.study import phases, studyfile
    from effsearch.trainer.training import train

    try:
        spec = studyfile.load(args.study)
    except ConfigError as e:  # bad input: the message, exit 2 (as the CLI)
        print(f"settle_eval.py: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.phase == "tune" and spec.tuning:
        spec = phases.tune_spec(spec)
    cfg = phases.trial_config(spec, spec.base)
    root = os.environ.get("EFFSEARCH_DATA_DIR")
    train(cfg.replace(epochs=0.05), data_root=root, progress=False)  # first-run set-up, untimed
    rows = {False: [], True: []}
    for _ in range(args.pairs):
        for settle in (False, True):
            t = time.perf_counter()
            r = train(cfg, data_root=root, progress=False, settle=settle, test=False)
            wall = time.perf_counter() - t
            f = r.final
            rows[settle].append((f.eval_seconds, wall, f.train_seconds, r.time_to_target, f.val_accuracy))
            imgs = [p.val_images or "all" for p in r.history]
            print(
                f"settle={settle!s:5}  eval {f.eval_seconds:6.2f} s  wall {wall:6.2f} s  train {f.train_seconds:6.2f} s  "
                f"time to target {r.time_to_target if r.time_to_target is None else round(r.time_to_target, 2)}  "
                f"val {f.val_accuracy:.4f}  points {imgs}",
                flush=True,
            )
    med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in rows.items()}
    print(
        f"median eval seconds: whole {med[False][0]:.2f}, settled {med[True][0]:.2f} "
        f"(ratio {med[True][0] / med[False][0]:.2f}); wall {med[False][1]:.2f} -> {med[True][1]:.2f} "
        f"(ratio {med[True][1] / med[False][1]:.2f}); validation images {cfg.dataset.val_fraction} of the "
        f"training file{'' if not cfg.dataset.val_subset or cfg.dataset.val_subset == 1 else f', subset {cfg.dataset.val_subset}'}"
    )


if __name__ == "__main__":
    main()
