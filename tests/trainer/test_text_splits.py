"""A user's text data as an audit found it: rows without a group, a language model's training stream
shorter than two windows, a data file rewritten in place with its old size and time."""

import json
import logging
import os

import numpy as np
import pytest
import torch

from effsearch.config import TrainConfig
from effsearch.trainer.data import lmdata, text
from effsearch.trainer.data.textsources import TextRows
from effsearch.trainer.training import train
from tests.support.text import lm_config, texts, tiny_text


def grouped_jsonl(path, n=200):
    """``n`` rows, a tenth of them in ten groups of two, the rest with a null or empty group."""
    xs, ys = texts(n)
    with open(path, "w", encoding="utf-8") as f:
        for i, (x, y) in enumerate(zip(xs, ys)):
            group = f"pkg{i // 20}" if i % 10 == 0 else (None if i % 3 else "")
            f.write(json.dumps({"text": x, "label": y, "group": group}) + "\n")
    return path


def test_rows_without_a_group_are_carved_alone_for_a_classifier(tmp_path, caplog):
    """A null group had been the group "None": its 180 rows all held out, 90% of the data in one split."""
    path = grouped_jsonl(tmp_path / "g.jsonl")
    d = TrainConfig.from_dict(tiny_text(path, **{"dataset.group_column": "group"})).dataset
    with caplog.at_level(logging.WARNING):
        made = text.tokenized(d, tmp_path / "data")
    sizes = {s: len(made.arrays[f"{s}_y"]) for s in text.SPLITS}
    assert sum(sizes.values()) == 200
    assert abs(sizes["test"] - 200 * d.test_fraction) <= 12, sizes
    assert abs(sizes["val"] - 200 * (1 - d.test_fraction) * d.val_fraction) <= 12, sizes
    warned = [r for r in caplog.records if "have no group" in r.getMessage()]
    assert len(warned) == 1 and "180 of 200 rows" in warned[0].getMessage()


def test_rows_without_a_group_are_carved_alone_for_a_language_model(tmp_path):
    path = grouped_jsonl(tmp_path / "g.jsonl")
    over = {"dataset.name": "jsonl", "dataset.label_column": None, "dataset.group_column": "group"}
    d = TrainConfig.from_dict(lm_config(path, **over)).dataset
    docs = lmdata.tokenized(d, tmp_path / "data").facts["documents"]
    assert sum(docs.values()) == 200
    assert abs(docs["test"] - 200 * d.test_fraction) <= 8, docs
    assert abs(docs["val"] - 200 * (1 - d.test_fraction) * d.val_fraction) <= 8, docs


def test_a_group_stays_whole_beside_rows_without_one():
    rows = TextRows("s", "line", groups=["a", None, "", "b", "a", " ", "b", None])
    ids = text.group_ids(rows)
    assert ids is not None and ids[0] == ids[4] and ids[3] == ids[6] and ids[0] != ids[3]
    assert len(set(ids[[1, 2, 5, 7]].tolist()) | {ids[0], ids[3]}) == 6


def test_rows_that_all_have_a_group_are_numbered_in_the_order_of_their_values():
    """The carving ranks groups by value (StratifiedGroupKFold's np.unique): numbered in that order, a
    file whose rows all have a group (the Debian recipes' source packages) is carved as before."""
    groups = ["zlib", "apt", "bash", "apt", "zlib", "coreutils"]
    ids = text.group_ids(TextRows("s", "line", groups=groups))
    assert ids is not None and ids.tolist() == np.unique(np.asarray(groups), return_inverse=True)[1].tolist()


def short_corpus(path, train_text):
    """One training document (``train_text``) and held-out documents of a few hundred bytes."""
    rows = [{"text": train_text, "split": "train"}]
    rows += [
        {"text": f"alice sees bob {i}. carol meets dave {i}.", "split": s} for s in ("val", "test") for i in range(8)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("doc_bytes,fraction", [(62, 1.0), (400, 0.15)])
def test_a_training_stream_under_two_windows_trains(tmp_path, doc_bytes, fraction):
    """63 tokens (62 bytes and SEP) with max_length 40, or a data_fraction cutting a stream to about
    as many: one window, not none (a NaN loss, the run "diverged")."""
    doc = ("bob likes carol. " * 30)[:doc_bytes]
    over = {
        "dataset.name": "jsonl",
        "dataset.label_column": None,
        "dataset.max_length": 40,
        "dataset.val_tokens": None,
        "dataset.data_fraction": fraction,
        "epochs": 3,
        "eval_every": 1,
        "target": {"metric": "val_loss", "value": 0.01},
    }
    cfg = TrainConfig.from_dict(lm_config(short_corpus(tmp_path / "s.jsonl", doc), **over))
    r = train(cfg, data_root=tmp_path / "data", progress=False)
    assert r.status != "diverged", r.reason
    assert all(np.isfinite(p.val_loss) for p in r.history) and r.history, r.history


def test_lm_batches_make_one_window_of_a_short_stream_and_as_many_as_before_of_a_long_one():
    short = lmdata.LMBatches(torch.arange(63), batch_size=8, length=40, seed=0)
    for _ in range(5):
        ((x, y),) = list(short)
        assert x.shape == (1, 40) and torch.equal(y, x + 1)
    long = lmdata.LMBatches(torch.arange(1000), batch_size=4, length=40, seed=0)
    assert long.windows == 24 and len(long) == 6


def test_a_data_file_rewritten_with_its_size_and_time_is_read_again(tmp_path):
    """The token cache had been keyed by a file's size and mtime: labels shuffled in place (cp -p,
    rsync -a) kept both, and the old labels were read from the cache."""
    xs, _ = texts(60)
    path = tmp_path / "d.jsonl"

    def write(labels):
        path.write_text("".join(json.dumps({"text": x, "label": y}) + "\n" for x, y in zip(xs, labels)))

    write(["aaa", "bbb"] * 30)
    d = TrainConfig.from_dict(tiny_text(path)).dataset
    first = text.tokenized(d, tmp_path / "data")
    assert not text.tokenized(d, tmp_path / "data").built  # unchanged: read from the cache
    stat = path.stat()
    write(["bbb", "aaa"] * 30)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    again, fresh = text.tokenized(d, tmp_path / "data"), text.tokenized(d, tmp_path / "fresh")
    assert again.built and not all(np.array_equal(again.arrays[k], first.arrays[k]) for k in first.arrays)
    assert all(np.array_equal(again.arrays[k], fresh.arrays[k]) for k in fresh.arrays)  # the new labels
