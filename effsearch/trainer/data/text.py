"""Text classification data, as ``load_splits`` takes a dataset: rows read (``textsources``), labels
mapped to classes, the splits carved, a tokenizer trained on the training split, every text
tokenized into a padded row, all of it cached on disk (``textcache``).

Classes: ``dataset.classes`` in its order, keeping only the rows of those labels; else the training
split's labels, sorted (integers as numbers). A label that only the validation or test split has
is refused. Splits: the source's own (a file's ``split`` column, a saved dataset's splits), else a
test split carved off, stratified, by ``dataset.test_fraction`` (seed ``split_seed + 3``, as for
images) and a validation split by ``dataset.val_fraction`` (seed ``split_seed``). The tokenizer
learns from the training split only: never a validation or test text. Each text becomes
``[CLS]`` and its first ``max_length - 1`` tokens (``- 2`` and ``[SEP]`` where a tokenizer file's
template closes a text), padded with id 0 to ``max_length``; batches are
cut to their longest text when served (``textbatches``).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from effsearch.config import ConfigError
from effsearch.config.sources import dataset_kind
from effsearch.trainer.data import textcache, tokenizer
from effsearch.trainer.data.hfdisk import is_parquet
from effsearch.trainer.data.stratify import OWN_SPLIT, refusal, stratified_split
from effsearch.trainer.data.textsources import Columns, TextRows, files_of, from_arrays, read_csv, read_hf, read_jsonl
from effsearch.trainer.data.userdata import UserData, existing_path

if TYPE_CHECKING:
    from effsearch.config import DatasetConfig

SPLITS = ("train", "val", "test")
HASHED = ("jsonl", "csv", "text")  # sources keyed by their bytes (an hf folder: by its files' stats)
log = logging.getLogger(__name__)


def load(d: DatasetConfig, cache_root: Path, arrays: Mapping[str, Any] | None = None) -> UserData:
    """The text dataset ``d`` names, tokenized (``arrays``: what an import path's callable returned)."""
    made = tokenized(d, cache_root, arrays)
    a = made.arrays
    return UserData(
        a["train_x"],
        a["train_y"],
        a["test_x"],
        a["test_y"],
        len(made.facts["classes"]),
        (a["val_x"], a["val_y"]),
        tokens=tokenizer.TokenShape(int(made.facts["vocab_size"]), d.max_length, own=tokenizer.own_ids(d.tokenizer)),
    )


def tokenized(d: DatasetConfig, cache_root: Path, arrays: Mapping[str, Any] | None = None) -> textcache.Tokenized:
    """The token rows of ``d``'s splits, from the cache under ``cache_root`` or tokenized into it."""
    cols = Columns(d.text_column, d.label_column, d.split_column, d.group_column)
    rows, identity = _source(d, cols, arrays)
    key = {
        "source": identity,
        "columns": [cols.text, cols.label, cols.split, cols.group],
        "classes": d.classes,
        # The tokenizer's training split depends on these (validation and test are carved from it).
        "split": [d.val_fraction, d.test_fraction, d.split_seed],
        "tokenizer": tokenizer.settings(d.tokenizer),
        "max_length": d.max_length,
    }
    return textcache.cached(cache_root / "text-cache", key, lambda: build(d, rows or _read(d, cols)))


def _file(d: DatasetConfig) -> Path:
    path = existing_path(d)
    kind = dataset_kind(d.name)
    if (kind == "hf") != path.is_dir() and not (kind == "hf" and is_parquet(path)):
        raise ConfigError(
            "dataset.path",
            f"{path} is {'a folder' if path.is_dir() else 'a file'}; {kind} reads a "
            f"{'folder (or a .parquet file)' if kind == 'hf' else 'file'}",
        )
    return path


def _source(d: DatasetConfig, cols: Columns, arrays: Mapping[str, Any] | None) -> tuple[TextRows | None, Any]:
    """(the rows, if reading them was needed to know the source; what identifies the source):
    a file's path, size and modification time, a folder's files', or a hash of an import path's texts."""
    if arrays is not None:
        rows = from_arrays(arrays, f"{d.name}()", cols)
        return rows, identity(d, rows)
    return None, identity(d, _file(d))


def identity(d: DatasetConfig, source: TextRows | Path) -> Any:
    """What names a source in its cache key: a hash of an import path's rows, of a text file's
    bytes (or a folder's files'), or the path, size and modification time of an hf folder's files."""
    if isinstance(source, TextRows):
        digest = hashlib.sha256()
        for t, s in zip(source.texts, source.splits or []):
            digest.update(f"{s}\0{t}\0".encode())
        digest.update(repr(source.labels).encode())
        return {"callable": d.name, "sha256": digest.hexdigest()}
    if dataset_kind(d.name) in HASHED:
        # Size and mtime miss a file edited in place and given its old time back (cp -p, rsync -a).
        return [[str(p), textcache.sha256_of(p)] for p in files_of(source)]
    return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in files_of(source)]


def _read(d: DatasetConfig, cols: Columns) -> TextRows:
    path = _file(d)
    kind = dataset_kind(d.name)
    return read_jsonl(path, cols) if kind == "jsonl" else read_csv(path, cols) if kind == "csv" else read_hf(path, cols)


def build(d: DatasetConfig, rows: TextRows) -> textcache.Tokenized:
    """Classes, splits, a tokenizer trained on the training split, and every text's padded row."""
    names, y = _classes(rows, d)
    groups = group_ids(rows)
    part = carve(given(rows, y), y, d, groups, names)
    t = d.tokenizer
    tok = tokenizer.made(t.name, t.vocab_size, [rows.texts[i] for i in part["train"]], t.path)
    arrays = {}
    for split in SPLITS:
        arrays[f"{split}_x"] = tokenizer.rows_of(tok, [rows.texts[i] for i in part[split]], d.max_length)
        arrays[f"{split}_y"] = y[part[split]]
    return textcache.Tokenized(arrays, tok.to_json(), {"classes": names, "vocab_size": tok.vocab_size})


def _order(labels: set) -> list:
    """Labels in a stable order: integers as numbers, then strings."""
    return sorted(labels, key=lambda v: (isinstance(v, str), v if isinstance(v, int) else 0, str(v)))


def _one_kind(rows: TextRows) -> None:
    """Labels all of one type: 1 and "1", or true and 1, are one class to a reader and two (or a
    clash) to the mapping, which had built a model of twice the classes and trained it to chance."""
    assert rows.labels is not None
    first: dict[str, int] = {}
    for i, v in enumerate(rows.labels):
        first.setdefault(type(v).__name__, i)
        if len(first) > 1:
            (a, i0), (b, i1) = first.items()
            raise ConfigError(
                "dataset.label_column",
                f"labels mix types: {rows.labels[i0]!r} ({a}, {rows.where(i0)}) and {rows.labels[i1]!r} ({b}, "
                f"{rows.where(i1)}); write every label one way (all strings, or all integers)",
            )


def _classes(rows: TextRows, d: DatasetConfig) -> tuple[list, np.ndarray]:
    """The class names and each row's class (-1: a row of a label ``dataset.classes`` leaves out)."""
    assert rows.labels is not None  # read with the label column
    _one_kind(rows)
    split = rows.splits or ["train"] * len(rows.texts)
    train = {v for v, s in zip(rows.labels, split) if s == "train"}
    if not train:
        raise ConfigError("dataset.path", f"{rows.source} has no training rows (its split column names none 'train')")
    if d.classes is not None:
        names = list(d.classes)
        if len(names) < 2 or len({str(c) for c in names}) != len(names):
            raise ConfigError("dataset.classes", f"must list two or more different labels; got {names!r}")
        missing = [c for c in names if str(c) not in {str(v) for v in train}]
        if missing:
            raise ConfigError("dataset.classes", f"{missing[0]!r} is the label of no training row of {rows.source}")
    else:
        names = _order(train)
        if len(names) < 2:
            raise ConfigError(
                "dataset.label_column",
                f"the training rows of {rows.source} hold one label ({names[0]!r}); a classifier needs at least two",
            )
    index = {str(c): i for i, c in enumerate(names)}
    y = np.array([index.get(str(v), -1) for v in rows.labels], np.int64)
    if d.classes is None:
        unseen = next((i for i in range(len(y)) if y[i] < 0), None)
        if unseen is not None:
            raise ConfigError(
                "dataset.label_column",
                f"label {rows.labels[unseen]!r} ({rows.where(unseen)}) is in the {split[unseen]} split but no "
                "training row has it: a classifier cannot learn a class it never sees (drop those rows, or "
                "list the classes to keep in dataset.classes)",
            )
    return [c if isinstance(c, (int, str)) else str(c) for c in names], y


def group_ids(rows: TextRows) -> np.ndarray | None:
    """Each row's group (``dataset.group_column``) as a number, in the order of the values (the
    order the carving ranks them in: a file whose rows all have one is carved as before); a row
    without one (null, empty) is a group of its own. As one group, such rows were all held out."""
    if rows.groups is None:
        return None
    missing = np.asarray([g is None or not str(g).strip() for g in rows.groups], bool)
    values, ids = np.unique(np.asarray([g for g, m in zip(rows.groups, missing) if not m]), return_inverse=True)
    alone = len(values) + np.arange(int(missing.sum()))  # after every named group
    out = np.empty(len(missing), np.int64)
    out[~missing], out[missing] = ids, alone
    if missing.any():
        log.warning(
            "%d of %d rows of %s have no group (dataset.group_column null or empty): each is carved alone",
            len(alone),
            len(out),
            rows.source,
        )
    return out


def given(rows: TextRows, y: np.ndarray) -> dict[str, np.ndarray]:
    """The rows of each split the source names, leaving out the classes not kept."""
    split = np.asarray(rows.splits or ["train"] * len(y))
    return {s: np.flatnonzero((split == s) & (y >= 0)) for s in SPLITS if np.any((split == s) & (y >= 0))}


def carve(
    part: dict[str, np.ndarray],
    y: np.ndarray,
    d: DatasetConfig,
    groups: np.ndarray | None = None,
    names: list | None = None,
) -> dict[str, np.ndarray]:
    """Test, then validation, carved (stratified; ``groups`` whole) from the training rows where the
    source has none (``names``: the classes' labels, for a refusal to name them)."""
    rows = sum(len(v) for v in part.values())
    for split, share, seed, field in (
        ("test", d.test_fraction, d.split_seed + 3, "dataset.test_fraction"),
        ("val", d.val_fraction, d.split_seed, "dataset.val_fraction"),
    ):
        if split in part:
            continue
        train = part["train"]
        try:
            keep, held = _held_out(train, y, groups, share, seed)
        except ValueError as e:  # sklearn: a class too small to stratify, or too few rows
            if is_lm(d):
                raise _too_few_documents(field, rows, d, groups) from None
            own = OWN_SPLIT.get((dataset_kind(d.name), split))
            what = f"a {'validation' if split == 'val' else split} split of {share:g}"
            raise refusal(field, y[train], share, what, "texts", own, e, names) from None
        part["train"], part[split] = np.sort(keep), np.sort(held)
    return part


def _too_few_documents(field: str, documents: int, d: DatasetConfig, groups: np.ndarray | None) -> ConfigError:
    """A language model's corpus too small to hold out test and validation documents (it has no
    classes: a document, or a group of them, is what is held out)."""
    held = f"{len(set(groups.tolist()))} groups (dataset.group_column)" if groups is not None else "documents"
    own = OWN_SPLIT.get((dataset_kind(d.name), "val"), "")
    return ConfigError(
        field,
        f"the corpus has {documents} documents{f' in {held}' if groups is not None else ''}: too few to hold "
        f"out whole {'groups' if groups is not None else 'documents'} for test and validation "
        f"(dataset.test_fraction {d.test_fraction:g}, dataset.val_fraction {d.val_fraction:g}; at least one "
        "each, and some left to train on); give more documents (a text file's paragraphs, separated by a "
        f"blank line, are its documents; a folder's files are one each){f', or {own}' if own else ''}",
    )


def _held_out(
    train: np.ndarray, y: np.ndarray, groups: np.ndarray | None, share: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(kept, held out) of ``train``: ``share`` held out, stratified by class; with ``groups``, each
    group wholly on one side (the first fold of a stratified group k-fold, k = 1 / share)."""
    import warnings

    if groups is None:
        return stratified_split(train, y[train], seed, test_size=share)
    from sklearn.model_selection import StratifiedGroupKFold

    folds = StratifiedGroupKFold(max(2, round(1 / share)), shuffle=True, random_state=seed)
    with warnings.catch_warnings():  # a class with fewer groups than folds: held out where it can be
        warnings.simplefilter("ignore", UserWarning)
        keep, held = next(folds.split(train, y[train], groups[train]))
    return train[keep], train[held]


def is_lm(d: DatasetConfig) -> bool:
    """The dataset is a language model's corpus (``lmdata``): plain text files, or rows read without
    labels (``dataset.label_column: null``)."""
    return d.name == "text" or d.label_column is None


def text_source(d: DatasetConfig) -> bool | None:
    """Whether the dataset ``d`` holds text, as far as can be told without calling user code:
    plain text files (a language model's corpus), jsonl and csv do, an hf folder does when its text
    column holds strings; None for an import path (its callable says, when called)."""
    kind = dataset_kind(d.name)
    if kind in ("text", "jsonl", "csv"):
        return True
    if kind == "hf" and d.path:
        from effsearch.trainer.data.textsources import hf_text_column

        return hf_text_column(Path(os.path.expanduser(d.path)).absolute(), d.text_column)
    return None if kind == "import" else False


def token_shape(d: DatasetConfig) -> tokenizer.TokenShape | None:
    """What a text model for ``d`` is built for, before any text is tokenized (None: ``d`` holds
    images): the vocabulary asked for and ``max_length``. An import path's callable is called."""
    text = text_source(d)
    if text is None:
        from effsearch.trainer.data.userdata import returns_texts

        text = returns_texts(d)
    if not text:
        return None
    return tokenizer.shape_of(d.tokenizer, d.max_length, causal=is_lm(d))
