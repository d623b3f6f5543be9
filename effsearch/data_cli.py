"""``effsearch data prepare``: write a dataset's splits as FFCV .beton files, once.

Kept apart from :mod:`effsearch.cli` (which only registers it): argparse only at
import; the dataset, torch and ffcv are imported when the command runs.
"""

from __future__ import annotations

import sys

from effsearch.config import DATASETS


def add_data_parser(sub) -> None:
    """Register ``data prepare`` on the top-level subparsers."""
    d = sub.add_parser("data", help="prepare datasets (FFCV .beton files)", description="Dataset preparation.")
    dsub = d.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    dsub.required = True
    p = dsub.add_parser(
        "prepare",
        help="write the train/val/test splits as FFCV .beton files",
        description="Write DATASET's train, validation and test splits (as a run with these split settings "
        "makes them) as FFCV .beton files: images, labels and each sample's index. Runs with "
        "`loader: ffcv` reuse them, and write them first when they are missing or stale (other "
        "split seed or fraction, changed dataset files). Needs the ffcv extra.",
    )
    p.add_argument(
        "dataset",
        metavar="DATASET",
        help=f"a built-in ({', '.join(DATASETS)}), imagefolder, npz or hf (with --path), or an import "
        "path package.module:callable",
    )
    p.add_argument("--path", help="dataset.path: the folder or file imagefolder, npz and hf read")
    p.add_argument(
        "--test-fraction", type=float, help="dataset.test_fraction (default 0.2; a source without a test split)"
    )
    p.add_argument("--data-dir", help="dataset folder (default: $EFFSEARCH_DATA_DIR, else ~/.cache/effsearch/data)")
    p.add_argument(
        "--out", help="write the files into this folder (default: DATA/ffcv/DATASET/SPLITKEY, where runs look for them)"
    )
    p.add_argument("--val-fraction", type=float, help="dataset.val_fraction (default 0.1)")
    p.add_argument("--split-seed", type=int, help="dataset.split_seed (default 0)")
    p.add_argument("--data-fraction", type=float, help="dataset.data_fraction (default 1.0)")
    p.add_argument("--image-size", type=int, help="dataset.image_size (default: the dataset's own)")
    p.add_argument("--synthetic-size", type=int, help="dataset.synthetic_size (synthetic only)")
    p.add_argument("--force", action="store_true", help="write the files even when they are up to date")
    p.set_defaults(func=cmd_prepare)


def cmd_prepare(args) -> int:
    from effsearch.config import TrainConfig

    dataset = {"name": args.dataset}
    for flag in (
        "path",
        "test_fraction",
        "val_fraction",
        "split_seed",
        "data_fraction",
        "image_size",
        "synthetic_size",
    ):
        if getattr(args, flag) is not None:
            dataset[flag] = getattr(args, flag)
    cfg = TrainConfig.from_dict({"dataset": dataset, "loader": "ffcv"}, source="effsearch data prepare")
    from effsearch.trainer.data import betons  # ConfigError with the install line if ffcv is missing
    from effsearch.trainer.data.splits import load_splits

    splits = load_splits(cfg, args.data_dir)
    info = betons.ensure_betons(
        cfg, splits, folder=args.out, data_root=args.data_dir, force=args.force, progress=sys.stderr.isatty()
    )
    if info.written:
        print(f"effsearch data prepare: wrote {info.folder} ({info.reason}) in {info.seconds:.1f}s", file=sys.stderr)
    else:
        print(f"effsearch data prepare: {info.folder} is up to date", file=sys.stderr)
    counts = {"train": len(splits.train_y), "val": len(splits.val_y), "test": len(splits.test_y)}
    for split in betons.SPLITS:
        path = info.path(split)
        print(f"{path}  {counts[split]} samples  {path.stat().st_size / 2**20:.1f} MiB")
    return 0
