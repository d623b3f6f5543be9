"""A language model's data: documents without labels, split by document, tokenized once, packed.

Documents come from the text readers (``textsources``: a jsonl or csv file's text column with
``dataset.label_column: null``, an hf text dataset, plain ``text`` files, an import path's
``x_train``). The splits are the source's own where it names them, else validation and test carved
by *document* (``dataset.val_fraction``, ``test_fraction``; ``group_column`` keeps a group whole),
never by window, so no held-out window shares a document with training. The tokenizer learns from
the training documents only. Each split becomes one token stream, every document followed by
``SEP``; the streams and each token's byte count (for bits per byte) are cached on disk
(``textcache``), so a study's workers tokenize nothing.

Training draws windows of ``max_length + 1`` tokens from the training stream (``LMBatches``): an
epoch is one pass over it, the windows at a random offset and in a random order. Validation scores
the first ``dataset.val_tokens`` tokens of the held-out stream (all of it by default): the same
tokens for every trial whatever its ``max_length``, cut into windows of its length, the last one
masked past them (``windows``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from effsearch.config import ConfigError
from effsearch.config.sources import dataset_kind
from effsearch.trainer.data import textcache, tokenizer
from effsearch.trainer.data.text import SPLITS, carve, given, group_ids, identity
from effsearch.trainer.data.textsources import Columns, TextRows, from_arrays, read_csv, read_hf, read_jsonl, read_text
from effsearch.trainer.data.userdata import existing_path
from effsearch.trainer.techniques.ramps import Shapes, shapes

if TYPE_CHECKING:
    from effsearch.config import DatasetConfig

IGNORE = -100  # a target no loss counts (F.cross_entropy's ignore_index): past the scored tokens


@dataclass(frozen=True)
class HeldOut:
    """What the validation score is made of: the tokens scored and the bytes of text they stand for."""

    tokens: int
    bytes: int

    def bpb(self, loss: float) -> float:
        """Bits per byte of a mean loss (nats a token) over these tokens."""
        return loss * self.tokens / (math.log(2) * max(self.bytes, 1))


@dataclass
class Streams:
    """The packed token streams (int64), the vocabulary, and the scored validation tokens."""

    train: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    vocab_size: int
    held_out: HeldOut


def load(d: DatasetConfig, cache_root: Path, arrays: Mapping[str, Any] | None = None) -> Streams:
    """``d``'s streams, cut for ``d.max_length`` (``arrays``: what an import path's callable returned)."""
    made = tokenized(d, cache_root, arrays)
    a, length = made.arrays, d.max_length
    train, val, test = (a[s].astype(np.int64) for s in SPLITS)
    if len(train) < length + 1:
        raise ConfigError(
            "dataset.path",
            f"the training documents hold {len(train)} tokens, shorter than one window of dataset.max_length "
            f"{length} (+1 for its last target); give more text or a shorter max_length",
        )
    train = train[: max(length + 1, round(len(train) * d.data_fraction))]
    count = _scored(d, len(val) - 1)
    test_x, test_y = windows(test, length, len(test) - 1) if len(test) > 1 else windows(val, length, count)
    held = HeldOut(count, int(a["token_bytes"][val[1 : count + 1]].sum()))
    return Streams(train, *windows(val, length, count), test_x, test_y, int(made.facts["vocab_size"]), held)


# val_fraction carves a file that names no splits; a file that names them holds out what it names.
MORE_HELD_OUT = "(dataset.val_fraction; where the file names each row's split: more rows named validation)"


def _scored(d: DatasetConfig, available: int) -> int:
    """The validation tokens each evaluation scores (``val_tokens``, shrunk by ``val_subset``)."""
    if d.max_length > available:
        raise ConfigError(
            "dataset.max_length",
            f"is {d.max_length} but the validation stream holds {available} tokens to predict: no window of "
            "it fits; lower max_length or hold out more text " + MORE_HELD_OUT,
        )
    if d.val_tokens is not None and d.val_tokens > available:
        raise ConfigError(
            "dataset.val_tokens",
            f"is {d.val_tokens} but the validation stream holds {available} tokens to predict; lower it "
            "(null: all of them) or hold out more text " + MORE_HELD_OUT,
        )
    return max(1, round((d.val_tokens or available) * d.val_subset))


def windows(stream: np.ndarray, length: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``count`` targets of ``stream`` (its tokens 1..count) as windows (k, length) of
    inputs and targets, the last window's targets past ``count`` masked (``IGNORE``)."""
    k = -(-count // length)
    padded = np.full(k * length + 1, tokenizer.PAD, np.int64)
    take = min(len(padded), len(stream))
    padded[:take] = stream[:take]
    x = padded[:-1].reshape(k, length)
    y = padded[1:].reshape(k, length).copy()
    y.reshape(-1)[count:] = IGNORE
    return x, y


def tokenized(d: DatasetConfig, cache_root: Path, arrays: Mapping[str, Any] | None = None) -> textcache.Tokenized:
    """The packed streams of ``d``'s splits and each token's bytes, from the cache or built into it."""
    cols = Columns(d.text_column, None, d.split_column, d.group_column)
    rows, identity = _source(d, cols, arrays)
    key = {
        "task": "language model",
        "source": identity,
        "columns": [cols.text, cols.split, cols.group],
        "split": [d.val_fraction, d.test_fraction, d.split_seed],
        "tokenizer": tokenizer.settings(d.tokenizer),
    }
    return textcache.cached(cache_root / "text-cache", key, lambda: build(d, rows or _read(d, cols)))


def _source(d: DatasetConfig, cols: Columns, arrays: Mapping[str, Any] | None) -> tuple[TextRows | None, Any]:
    """(the rows, if reading them was needed to know the source; what identifies the source)."""
    if dataset_kind(d.name) == "import":
        from effsearch.trainer.data.userdata import call

        rows = from_arrays(arrays if arrays is not None else call(d, needs=("x_train",)), f"{d.name}()", cols)
        return rows, identity(d, rows)
    return None, identity(d, existing_path(d))


def _read(d: DatasetConfig, cols: Columns) -> TextRows:
    path, kind = existing_path(d), dataset_kind(d.name)
    readers = {"jsonl": read_jsonl, "csv": read_csv, "hf": read_hf}
    if kind == "text":
        return read_text(path)
    if kind not in readers:
        raise ConfigError(
            "dataset.label_column",
            f"null makes the rows a language model's documents; dataset.name {d.name!r} holds images",
        )
    return readers[kind](path, cols)


def build(d: DatasetConfig, rows: TextRows) -> textcache.Tokenized:
    """Splits by document, a tokenizer trained on the training documents, each split packed."""
    y = np.zeros(len(rows.texts), np.int64)  # one "class": the carving is by document (and group) alone
    part = carve(given(rows, y), y, d, group_ids(rows))
    if d.tokenizer.name == "wordpiece":
        raise ConfigError(
            "dataset.tokenizer.name", "wordpiece cannot be a language model's tokenizer: use bpe or bytes"
        )
    t = d.tokenizer
    tok = tokenizer.made(t.name, t.vocab_size, [rows.texts[i] for i in part["train"]], t.path)
    if isinstance(tok, tokenizer.FileTokenizer) and tok.model == "WordPiece":
        raise ConfigError(
            "dataset.tokenizer.path",
            f"{t.path} holds a WordPiece tokenizer, which cannot be a language model's (it drops spaces, "
            "so no text can be written back): use a BPE or Unigram tokenizer, or bpe or bytes",
        )
    arrays = {split: pack(tok.encode([rows.texts[i] for i in part[split]])) for split in SPLITS}
    arrays["token_bytes"] = tok.token_bytes()
    facts = {"vocab_size": tok.vocab_size, "documents": {s: len(part[s]) for s in SPLITS}}
    return textcache.Tokenized(arrays, tok.to_json(), facts)


def pack(docs: list[np.ndarray]) -> np.ndarray:
    """Documents' ids as one stream, each document followed by ``SEP`` (int32)."""
    if not docs:
        return np.zeros(0, np.int32)
    sep = np.array([tokenizer.SEP], np.int32)
    return np.concatenate([part for ids in docs for part in (ids.astype(np.int32), sep)])


class LMBatches:
    """Training windows from the token stream on the device: each epoch at a random offset, in a
    random order, ``batch_size`` a batch (whole batches only: one shape for every step); each batch
    is (inputs, targets), the targets the inputs moved on by one token. With ``world > 1`` each rank
    serves every world-th window of the same order."""

    def __init__(
        self, stream: torch.Tensor, batch_size: int, length: int, seed: int, rank: int = 0, world: int = 1
    ) -> None:
        self.stream, self.batch_size, self.length = stream, batch_size, length
        self.rank, self.world = rank, world
        # The fewest whole windows any offset leaves: every epoch has as many batches. A stream of
        # under two windows still has one (at fewer offsets): none made a NaN loss, "diverged".
        self.windows = max(1, (len(stream) - length) // length)
        self.offsets = min(length, len(stream) - length * self.windows)
        self.gen = torch.Generator()
        self.gen.manual_seed(seed)
        self.span = torch.arange(length + 1, device=stream.device)
        self.shapes: Shapes | None = None  # a batch-size ramp or sequence-length warm-up (ramps.py)
        self.served = 0  # batches served so far: the ramps' clock

    def ramp(self, epochs: float, batch_ramp: float, length_warmup: float) -> None:
        """Grow the batch over the first ``batch_ramp`` of a run of ``epochs``, the windows over the
        first ``length_warmup`` (shares of its batches; 0: that one off)."""
        total = epochs * len(self)
        self.shapes = shapes(self.batch_size, self.length, round(batch_ramp * total), round(length_warmup * total))

    def __len__(self) -> int:
        return max(1, self.windows // self.world // self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        offset = int(torch.randint(0, self.offsets, (1,), generator=self.gen))
        starts = offset + self.length * torch.randperm(self.windows, generator=self.gen)
        starts = starts[self.rank :: self.world].to(self.stream.device)
        if self.shapes is not None:
            yield from self._shaped(starts)
            return
        b = self.batch_size
        for i in range(len(self)):
            w = self.stream[starts[i * b : (i + 1) * b, None] + self.span]
            yield w[:, :-1], w[:, 1:]

    def _shaped(self, starts: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """An epoch's batches at the ramps' shapes: fewer windows, or each window's first tokens."""
        assert self.shapes is not None
        at = 0
        for _ in range(len(self)):
            n, length = self.shapes.at(self.served)
            w = self.stream[starts[at : at + n, None] + self.span[: length + 1]]
            at += n
            self.served += 1
            yield w[:, :-1], w[:, 1:]


class LMBatch:
    """A batch of windows onto the device (nothing to augment, no padding to cut)."""

    def __init__(self, device: str) -> None:
        self.device = device

    def __call__(self, batch: Any) -> tuple[torch.Tensor, ...]:
        return tuple(t.to(self.device, non_blocking=True) for t in batch)
