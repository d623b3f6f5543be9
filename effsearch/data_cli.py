"""``effsearch data prepare``: write a dataset's splits once, ahead of the runs that read them: an
image dataset's as FFCV .beton files, a text dataset's as token rows in the token cache.

Kept apart from :mod:`effsearch.cli` (which only registers it): argparse only at
import; the dataset, torch, ffcv and tokenizers are imported when the command runs.
"""

from __future__ import annotations

import sys
import time

from effsearch.config import DATASETS, ConfigError

DATASET_FLAGS = (
    "path",
    "test_fraction",
    "val_fraction",
    "split_seed",
    "data_fraction",
    "image_size",
    "synthetic_size",
    "image_column",
    "text_column",
    "label_column",
    "max_length",
)


def add_data_parser(sub) -> None:
    """Register ``data prepare`` on the top-level subparsers."""
    d = sub.add_parser(
        "data", help="prepare datasets (FFCV .beton files, tokenized text)", description="Dataset preparation."
    )
    dsub = d.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    dsub.required = True
    p = dsub.add_parser(
        "prepare",
        help="write the train/val/test splits as FFCV .beton files, or a text dataset's tokens",
        description="Write DATASET's train, validation and test splits (as a run with these split settings "
        "makes them) once, ahead of the runs. Images: FFCV .beton files (images, labels and each sample's "
        "index); runs with `loader: ffcv` reuse them, and write them first when they are missing or stale "
        "(other split seed or fraction, changed dataset files); needs the ffcv extra. Text (jsonl, csv, hf "
        "text, plain text files, an import path returning texts): the tokenizer trained on the training split and every text's "
        "tokens, in the token cache every run and study worker then reads (DATA/text-cache). --config takes "
        "the dataset of a config file, or of a study file's base; the dataset flags given beside it change it.",
    )
    p.add_argument(
        "dataset",
        metavar="DATASET",
        nargs="?",
        help=f"a built-in ({', '.join(DATASETS)}), imagefolder, npz, hf, jsonl, csv or text (a language model's "
        "corpus) with --path, or an import path package.module:callable; or leave it out and give --config",
    )
    p.add_argument("--config", help="a config file (or a study file: its base) whose dataset to prepare")
    p.add_argument("--path", help="dataset.path: the folder or file imagefolder, npz, hf, jsonl and csv read")
    p.add_argument(
        "--test-fraction", type=float, help="dataset.test_fraction (default 0.2; a source without a test split)"
    )
    p.add_argument("--data-dir", help="dataset folder (default: $EFFSEARCH_DATA_DIR, else ~/.cache/effsearch/data)")
    p.add_argument(
        "--out", help="FFCV: write the files into this folder (default: DATA/ffcv/DATASET/SPLITKEY, where runs look)"
    )
    p.add_argument("--val-fraction", type=float, help="dataset.val_fraction (default 0.1)")
    p.add_argument("--split-seed", type=int, help="dataset.split_seed (default 0)")
    p.add_argument("--data-fraction", type=float, help="dataset.data_fraction (default 1.0)")
    p.add_argument("--image-size", type=int, help="dataset.image_size (default: the dataset's own)")
    p.add_argument("--synthetic-size", type=int, help="dataset.synthetic_size (synthetic only)")
    p.add_argument("--image-column", help="dataset.image_column (hf images; default image)")
    p.add_argument("--text-column", help="dataset.text_column (text; default text)")
    p.add_argument(
        "--label-column", help="dataset.label_column (default label; null: a language model's corpus, no labels)"
    )
    p.add_argument("--max-length", type=int, help="dataset.max_length (text; default 128)")
    p.add_argument("--tokenizer", help="dataset.tokenizer.name (text: bytes, bpe, wordpiece or file; default bpe)")
    p.add_argument("--vocab-size", type=int, help="dataset.tokenizer.vocab_size (bpe, wordpiece; default 8192)")
    p.add_argument("--tokenizer-path", help="dataset.tokenizer.path (file: your tokenizer.json)")
    p.add_argument("--force", action="store_true", help="FFCV: write the files even when they are up to date")
    p.set_defaults(func=cmd_prepare)


def _config(args) -> tuple[dict, str]:
    """The config (a raw dict) whose dataset to prepare, and where it came from: --config's (a
    study file's base) with the dataset flags given on top of it, else the flags'."""
    flags = _dataset_flags(args)
    if args.config:
        if args.dataset:
            raise ConfigError("DATASET", "give DATASET or --config, not both")
        data = _config_file(args.config)
        dataset = dict(data.get("dataset") or {})
        tokenizer = {**(dataset.get("tokenizer") or {}), **flags.pop("tokenizer", {})}
        data["dataset"] = {**dataset, **flags, **({"tokenizer": tokenizer} if tokenizer else {})}
        return data, args.config
    if not args.dataset:
        raise ConfigError("DATASET", "missing: name a dataset (e.g. cifar10, jsonl --path FILE) or give --config")
    return {"dataset": {"name": args.dataset, **flags}}, "effsearch data prepare"


def _config_file(path: str) -> dict:
    """A config file's settings, or a study file's base's."""
    from effsearch.config import read_yaml

    if "base" in read_yaml(path):  # a study file
        from effsearch.search.study.studyfile import load

        return load(path).base.to_dict()
    from effsearch import api

    return api.load_config(path).to_dict()


def _dataset_flags(args) -> dict:
    """The dataset fields the flags give (their tokenizer's under ``tokenizer``)."""
    dataset = {flag: getattr(args, flag) for flag in DATASET_FLAGS if getattr(args, flag) is not None}
    if dataset.get("label_column") == "null":  # as --set reads it: a language model's corpus
        dataset["label_column"] = None
    given = (("name", args.tokenizer), ("vocab_size", args.vocab_size), ("path", args.tokenizer_path))
    tokenizer = {k: v for k, v in given if v is not None}
    if tokenizer:
        dataset["tokenizer"] = tokenizer
    return dataset


def cmd_prepare(args) -> int:
    from effsearch.config import DatasetConfig, TrainConfig
    from effsearch.config.fields import build
    from effsearch.config.readers import lm_data
    from effsearch.trainer.data.text import token_shape

    data, source = _config(args)
    try:
        dataset = build(DatasetConfig, data["dataset"], "dataset.")
    except ConfigError as e:
        raise e.with_source(source) from None
    if token_shape(dataset) is not None:  # text: checked with its model (the file's, else a built-in's)
        model = data.get("model") or {"name": "gpt" if lm_data(data) else "text-encoder"}
        return _prepare_text(TrainConfig.from_dict({"dataset": data["dataset"], "model": model}, source=source), args)
    # Images: the .beton files that runs with loader ffcv read.
    cfg = TrainConfig.from_dict({"dataset": data["dataset"], "loader": "ffcv"}, source=source)
    from effsearch.trainer.data import betons  # ConfigError with the install line if ffcv is missing
    from effsearch.trainer.data.splits import load_splits

    splits = load_splits(cfg, args.data_dir)
    info = betons.ensure_betons(
        cfg, splits, folder=args.out, data_root=args.data_dir, force=args.force, progress=sys.stderr.isatty()
    )
    if info.written:
        why = "" if info.reason == betons.NOT_PREPARED else f" (rewritten: {info.reason})"
        print(f"effsearch data prepare: wrote {info.folder}{why} in {info.seconds:.1f}s", file=sys.stderr)
    else:
        print(f"effsearch data prepare: {info.folder} is up to date", file=sys.stderr)
    counts = {"train": len(splits.train_y), "val": len(splits.val_y), "test": len(splits.test_y)}
    for split in betons.SPLITS:
        path = info.path(split)
        print(f"{path}  {counts[split]} samples  {path.stat().st_size / 2**20:.1f} MiB")
    return 0


def _prepare_text(cfg, args) -> int:
    """Tokenize a text dataset into the token cache (or find it there)."""
    from effsearch.config.readers import lm_data
    from effsearch.trainer.data import lmdata, text
    from effsearch.trainer.data.datasets import data_dir
    from effsearch.trainer.data.userdata import call

    if args.out or args.force:
        raise ConfigError("--out" if args.out else "--force", "applies to FFCV's files; text goes to the token cache")
    d = cfg.dataset
    t = time.perf_counter()
    arrays = call(d) if text.text_source(d) is None else None
    corpus = lm_data(cfg.to_dict())  # a language model's documents: packed streams, no labels
    made = (lmdata if corpus else text).tokenized(d, data_dir(args.data_dir), arrays)
    what = "tokenized into" if made.built else "read from"
    where = made.folder or "memory (the cache folder could not be written)"
    print(f"effsearch data prepare: {what} {where} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    a, vocab = made.arrays, f"{d.tokenizer.name} vocabulary {made.facts['vocab_size']}"
    if corpus:
        docs = made.facts["documents"]
        print(", ".join(f"{s} {docs[s]} documents ({len(a[s])} tokens)" for s in lmdata.SPLITS) + f"; {vocab}")
        return 0
    counts = ", ".join(f"{s} {len(a[f'{s}_y'])}" for s in text.SPLITS)
    print(f"{counts} texts; {len(made.facts['classes'])} classes; {vocab}")
    return 0
