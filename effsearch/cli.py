"""The ``effsearch`` command line. Heavy imports (torch, Composer, Optuna) stay
inside the commands so that ``--help`` and bad input answer at once."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from effsearch.config import ConfigError

EXIT_BAD_INPUT = 2


def _cmd_train(args) -> int:
    from effsearch.config import TrainConfig

    cfg = TrainConfig.from_yaml(args.config, args.set)
    out = Path(args.out) if args.out else Path("runs") / f"{Path(args.config).stem}-{cfg.hash()}"
    from effsearch.trainer.run import check_runnable, train

    check_runnable(cfg)
    print(f"effsearch train: {args.config} -> {out}/result.json", file=sys.stderr)
    try:
        result = train(cfg, data_root=args.data_dir, out_dir=out, progress=not args.quiet)
    except KeyboardInterrupt:
        print(f"\ninterrupted: partial result written to {out / 'result.json'}", file=sys.stderr)
        return 130
    f = result.final
    ttt = f"{result.time_to_target:.1f}s" if result.time_to_target is not None else "not reached"
    print(f"status: {result.status}{' (' + result.reason + ')' if result.reason else ''}")
    print(f"val accuracy {f.get('val_accuracy', float('nan')):.4f}  test accuracy {f.get('test_accuracy', float('nan')):.4f}")
    print(f"train {f.get('train_seconds', 0):.1f}s (eval {f.get('eval_seconds', 0):.1f}s apart)  "
          f"time to {result.target_accuracy:.3f}: {ttt}")
    if f.get("sparsity"):
        print(f"sparsity {f['sparsity']:.3f}  nonzero params {f['nonzero_params']:,}")
    if args.json:
        print(json.dumps(result.to_dict()))
    return 0 if result.status == "completed" else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="effsearch",
        description="Search how to train a network: the Pareto front of wall-clock time to a target "
                    "accuracy vs final accuracy, over CORDS subsets, Composer algorithms, FFCV, schedules, "
                    "batch size, sparsity and precision.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    t = sub.add_parser("train", help="train one configuration (a TrainConfig YAML) and write result.json",
                       description="Train one TrainConfig YAML; writes OUT/result.json with the history, "
                                   "final accuracies, train seconds (evaluation excluded) and time to target.")
    t.add_argument("config", help="TrainConfig YAML, e.g. configs/quickstart.yaml or an exported best.yaml")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field, dotted keys, YAML values (repeatable): --set optimizer.lr=0.1")
    t.add_argument("--out", help="output folder (default: runs/NAME-HASH)")
    t.add_argument("--data-dir", help="dataset folder (default: $EFFSEARCH_DATA_DIR, else ~/.cache/effsearch/data)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    t.set_defaults(func=_cmd_train)

    from effsearch.data_cli import add_data_parser  # `effsearch data prepare` (FFCV .beton files)

    add_data_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"effsearch: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
