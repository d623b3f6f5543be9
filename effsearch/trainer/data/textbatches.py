"""Batches of token rows: each training batch cut to its longest text, the mask left to the model.

Token rows are padded to ``dataset.max_length`` once (``text.py``); a batch of them pads only as
far as its longest text, which with Debian's descriptions (median 95 BPE tokens of 128) spends
about a third less attention and feed-forward work than full rows. The lengths are read on the
host, from a copy made when the loader is built, so no training step waits for the device.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from effsearch.trainer.data.splits import DeviceBatches
from effsearch.trainer.data.tokenizer import PAD


class TokenBatches(DeviceBatches):
    """``DeviceBatches`` of token rows, each batch cut to its longest text. ``full``: every batch keeps
    all ``max_length`` columns (a compiled model then sees one shape, and compiles once)."""

    def __init__(self, *args: Any, full: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.full = full
        self.lengths = torch.as_tensor(self.x != PAD).sum(1).cpu()  # one read, on the host from now on

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        order = self.order()
        on_device = order.pin_memory().to(self.device, non_blocking=True) if self.device != "cpu" else order
        weights = self.weights.to(self.device) if self.weights is not None else None  # once an epoch
        n, b, width = len(order), self.batch_size, int(self.x.shape[1])
        stop = n - n % b if self.drop_last and n >= b else n
        for i in range(0, stop, b):
            longest = width if self.full else int(self.lengths[order[i : i + b]].max())
            j = on_device[i : i + b]
            x = self.x[j, :longest]
            if weights is not None:
                yield x, self.y[j], weights[j]
            else:
                yield x, self.y[j]


class TokenBatch:
    """A batch of token rows onto the device (the text side of ``splits.BatchAugment``: nothing to
    augment). Evaluation slices come whole: each is cut to its longest text here (one read a batch)."""

    def __init__(self, device: str, train: bool) -> None:
        self.device, self.train = device, train

    def __call__(self, batch: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        x, *rest = batch
        x = x.to(self.device, non_blocking=True)
        if not self.train:
            x = x[:, : max(1, int((x != PAD).any(0).sum()))]
        return (x, *[r.to(self.device, non_blocking=True) for r in rest])
