"""The sampler a CORDS subset is served through (``selection.py`` chooses the subset; the torch
and FFCV loaders both iterate this)."""

from __future__ import annotations

from collections.abc import Iterator

import torch


class SubsetSampler(torch.utils.data.Sampler):
    """Serves ``per_epoch`` indices an epoch: of the current subset, or (warm start,
    before any subset) the next part of a stream of full-data permutations."""

    def __init__(self, n: int, per_epoch: int, seed: int) -> None:
        self.n, self.per_epoch = n, per_epoch
        self.gen = torch.Generator()
        self.gen.manual_seed(seed + 1009)
        self.subset: torch.Tensor | None = None
        self._stream = torch.empty(0, dtype=torch.long)

    def set_subset(self, indices: torch.Tensor) -> None:
        self.subset = indices.to(torch.long)

    def __len__(self) -> int:
        return self.per_epoch if self.subset is None else min(len(self.subset), self.per_epoch)

    def __iter__(self) -> Iterator[int]:
        if self.subset is None:
            while len(self._stream) < self.per_epoch:
                self._stream = torch.cat([self._stream, torch.randperm(self.n, generator=self.gen)])
            out, self._stream = self._stream[: self.per_epoch], self._stream[self.per_epoch :]
        else:
            out = self.subset[torch.randperm(len(self.subset), generator=self.gen)][: self.per_epoch]
        return iter(out.tolist())
