"""FFCV as the training data loader (``loader: ffcv``).

The files: ``betons.py`` writes and checks them (``ensure_betons``).

Loading. :class:`FFCVTrainLoader` keeps **one** ``ffcv.loader.Loader`` (and so
one compiled pipeline) for the whole run and hands it a new traversal order at
each epoch: FFCV's pipeline is JIT-compiled per ``Loader`` (at its first batch;
done here during set-up, see :attr:`FFCVTrainLoader.compile_seconds`), so a new
subset must never mean a new ``Loader``. The order comes from a sampler:

* full data: a ``torch.utils.data.RandomSampler`` seeded with ``cfg.seed``, the
  very order of the PyTorch path, so the two loaders feed identical batches;
* CORDS: the selection's own ``SubsetSampler``; :meth:`FFCVTrainLoader.set_subset`
  (or the selection writing into :attr:`FFCVTrainLoader.weights`) changes what
  the next epoch serves without recompiling anything.

The last partial batch is **kept** (``drop_last=False``, unlike FFCV's
default): every selected sample is seen every epoch, as on the PyTorch path.

Augmentation. The pipeline only decodes (a memcpy) and, on CUDA, copies to the
GPU on FFCV's own stream; batches are uint8 N,C,H,W and go through the same
:class:`effsearch.trainer.data.splits.BatchAugment` as the PyTorch path (flip,
reflect pad-crop, normalisation, seeded). That is both identical augmentation
and the faster choice: FFCV's ``RandomHorizontalFlip``/``RandomTranslate``
are per-image numba loops on the CPU with numba's own, unseeded RNG, whereas
BatchAugment works on whole batches, on the GPU when there is one
(``benchmarks/ffcv_loader.py`` measures both; ``docs/benchmarks-ffcv.md``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from effsearch.config.machine import require_ffcv
from effsearch.trainer.data.betons import Prepared, ensure_betons, train_encoding
from effsearch.trainer.data.splits import Splits

if TYPE_CHECKING:
    from effsearch.config import TrainConfig
    from effsearch.trainer.data.selection import SubsetSelection
    from effsearch.trainer.parallel.distributed import Context

# A ConfigError with the install line when ffcv or its compiled parts do not import (torch's
# thread count, which importing ffcv sets to one, is put back); the names below then import.
require_ffcv()
from ffcv.fields.decoders import IntDecoder, NDArrayDecoder, SimpleRGBImageDecoder  # noqa: E402
from ffcv.loader import Loader, OrderOption  # noqa: E402
from ffcv.loader.epoch_iterator import EpochIterator  # noqa: E402
from ffcv.transforms import ToDevice, ToTensor, ToTorchImage  # noqa: E402


def read_beton(path: str | os.PathLike, batch_size: int = 1024) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole file, in stored order: (images uint8 N,C,H,W, labels, indices). For checks and tests."""
    loader = Loader(
        str(path),
        batch_size=batch_size,
        num_workers=1,
        order=OrderOption.SEQUENTIAL,
        drop_last=False,
        pipelines=_pipelines("cpu"),
    )
    xs, ys, ids = [], [], []
    for x, y, i in loader:
        xs.append(x.clone())
        ys.append(y.view(-1).clone())
        ids.append(i.view(-1).clone())
    return torch.cat(xs), torch.cat(ys), torch.cat(ids)


# -- the loader -------------------------------------------------------------------


def _pipelines(device: str, jpeg: bool = False) -> dict:
    # A JPEG field decodes to N,H,W,C: ToTorchImage makes it N,C,H,W, as the raw field stores it.
    image = (
        [SimpleRGBImageDecoder(), ToTensor(), ToTorchImage(channels_last=False)]
        if jpeg
        else [NDArrayDecoder(), ToTensor()]
    )
    label = [IntDecoder(), ToTensor()]
    if device == "cuda":  # FFCV copies on its own CUDA stream, ahead of the training step
        image.append(ToDevice(torch.device("cuda"), non_blocking=True))
        label.append(ToDevice(torch.device("cuda"), non_blocking=True))
    return {"image": image, "label": label, "index": [IntDecoder(), ToTensor()]}


class _Epoch(EpochIterator):
    """ffcv's epoch thread, but a failure in it ends the epoch with the error instead
    of leaving the consumer waiting forever on its queue."""

    error: BaseException | None = None

    def run(self) -> None:
        try:
            super().run()
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            self.error = e
            self.output_queue.put(None)


class EpochOrder(torch.utils.data.Sampler):
    """The default order: each epoch a permutation of all ``n`` samples, the very
    order of the PyTorch path (``data.DeviceBatches``: one ``randperm(n)`` an epoch
    from a CPU generator seeded with ``seed``); after :meth:`set_subset`, a fresh
    permutation of exactly the subset.
    """

    def __init__(self, n: int, seed: int, batch_size: int | None = None) -> None:
        self.n, self.batch_size = n, batch_size
        self.gen = torch.Generator()
        self.gen.manual_seed(seed)
        self.subset: torch.Tensor | None = None

    def set_subset(self, indices: Any) -> None:
        self.subset = None if indices is None else torch.as_tensor(indices, dtype=torch.long)

    def __len__(self) -> int:
        return self.n if self.subset is None else len(self.subset)

    def __iter__(self) -> Iterator[int]:
        if self.subset is None:
            return iter(torch.randperm(self.n, generator=self.gen).tolist())
        return iter(self.subset[torch.randperm(len(self.subset), generator=self.gen)].tolist())


class FFCVTrainLoader:
    """Batches ``(x, y)`` or, with :attr:`weights`, ``(x, y, w)`` from one .beton, through one
    compiled ffcv ``Loader`` for its whole life.

    ``x``: uint8 N,C,H,W (on the GPU when ``device`` is cuda);
    ``y``: int64 labels; ``w``: float32 per-sample weights, looked up by the
    ``index`` field stored with each image.

    The order each epoch comes from ``sampler`` (positions in the split): any
    iterable of ints with ``len()``, e.g. CORDS's ``SubsetSampler``; default
    :class:`EpochOrder`. :meth:`set_subset` changes it between epochs.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        n: int,
        batch_size: int,
        *,
        seed: int = 0,
        device: str = "cpu",
        sampler: Any = None,
        weights: torch.Tensor | None = None,
        num_workers: int | None = None,
        batches_ahead: int = 3,
        warm_up: bool = True,
        jpeg: bool = False,
    ) -> None:
        self.path, self.n, self.batch_size, self.device = str(path), n, batch_size, device
        self.sampler = sampler if sampler is not None else EpochOrder(n, seed, batch_size)
        self.weights = weights
        self.drop_last = False  # every sample of the order is served, the last batch may be short
        # ffcv sets torch's intra-op thread count to its worker count (Compiler.set_num_threads):
        # use torch's own, so that training threads stay as they were.
        workers = num_workers or torch.get_num_threads()
        t0 = time.perf_counter()
        self.loader = Loader(
            self.path,
            batch_size=batch_size,
            num_workers=workers,
            os_cache=True,
            order=OrderOption.SEQUENTIAL,
            seed=seed,
            drop_last=False,
            batches_ahead=batches_ahead,
            pipelines=_pipelines(device, jpeg),
        )
        if self.loader.reader.num_samples != n:
            raise ValueError(f"{self.path} holds {self.loader.reader.num_samples} samples, expected {n}")
        self._current: _Epoch | None = None
        self.epochs = 0
        self.prepared: Prepared | None = None  # set by make_train_loader: where the files came from
        self.compile_seconds = 0.0
        if warm_up:  # numba compiles the pipeline at its first batch: do it now, in set-up
            order = np.arange(min(batch_size, n), dtype=np.uint64)
            it = _Epoch(self.loader, order)
            for _ in it:
                pass
            it.close()
            if it.error is not None:
                raise RuntimeError(f"ffcv pipeline failed on {self.path}: {it.error}") from it.error
        self.compile_seconds = time.perf_counter() - t0

    # what CORDS selection calls
    def set_subset(self, indices: Any, weights: Any = None) -> None:
        """Serve exactly ``indices`` (positions in the split) from the next epoch on.

        With ``weights`` (one per index), batches carry them as their third
        element; a repeated index keeps the sum of its weights (without, a
        weighted loader gives each weight 1). Costs a scatter of ``len(indices)``
        floats, milliseconds: the Loader and its compiled pipeline are kept.
        """
        idx = torch.as_tensor(np.asarray(indices), dtype=torch.long).reshape(-1)
        if len(idx) == 0:
            raise ValueError("set_subset: no indices")
        if int(idx.min()) < 0 or int(idx.max()) >= self.n:
            raise ValueError(f"set_subset: indices must be in [0, {self.n}); got {int(idx.min())}..{int(idx.max())}")
        if weights is not None:
            w = torch.as_tensor(np.asarray(weights), dtype=torch.float32).reshape(-1)
            if len(w) != len(idx):
                raise ValueError(f"set_subset: {len(idx)} indices but {len(w)} weights")
            idx, inverse = torch.unique(idx, return_inverse=True)
            summed = torch.zeros(len(idx)).index_add_(0, inverse, w)
            if self.weights is None:
                self.weights = torch.zeros(self.n)
            self.weights.zero_()
            self.weights[idx] = summed
        else:
            idx = torch.unique(idx)
            if self.weights is not None:  # a weighted loader stays weighted: weight 1 each
                self.weights.zero_()
                self.weights[idx] = 1.0
        self.sampler.set_subset(idx)

    # the iterable Composer drives
    def __len__(self) -> int:
        return math.ceil(len(self.sampler) / self.batch_size)

    def epoch_order(self) -> np.ndarray:
        """The next epoch's positions (draws from the sampler)."""
        order = np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        if len(order) and (order.min() < 0 or order.max() >= self.n):
            raise ValueError(f"sampler gave positions outside [0, {self.n})")
        return order.astype(np.uint64)  # the dtype ffcv compiled for

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        self.close()
        order = self.epoch_order()
        self.epochs += 1
        if len(order) == 0:
            return
        it = _Epoch(self.loader, order)
        self._current = it
        weights = self.weights
        if weights is not None and self.device == "cuda":
            weights = weights.to(self.device)
        try:
            for x, y, index in it:
                # FFCV fills a ring of batches_ahead + 2 buffers: a yielded view is overwritten once the
                # next batch is drawn. Copies (about 10 us for 128 Fashion-MNIST images) keep batches
                # valid as long as they are held, as on the PyTorch path.
                x, y = x.clone(), y.view(-1).clone()
                if weights is None:
                    yield x, y
                else:
                    index = index.view(-1)
                    if self.device == "cuda":
                        index = index.to(self.device, non_blocking=True)
                    yield x, y, weights[index]
            if it.error is not None:
                raise RuntimeError(f"ffcv pipeline failed on {self.path}: {it.error}") from it.error
        finally:
            it.close()
            if self._current is it:
                self._current = None

    def close(self) -> None:
        """Stop the background thread of an epoch left unfinished."""
        if self._current is not None:
            self._current.close()
            self._current = None


# -- what effsearch.trainer.training calls ------------------------------------------------


def make_train_loader(
    cfg: TrainConfig,
    splits: Splits,
    device: str,
    data_root: str | os.PathLike | None = None,
    dist: Context | None = None,
) -> tuple[FFCVTrainLoader, SubsetSelection | None]:
    """``(train_loader, selection or None)`` for ``loader: ffcv``; writes the .beton files first
    when they are missing or stale."""
    prepared = ensure_betons(cfg, splits, data_root=data_root)
    n = len(splits.train_y)
    plan = None
    if cfg.selection.strategy != "full":
        from effsearch.trainer.data.selection import plan_selection

        # The selection's sampler and weights: it calls sampler.set_subset(idx) and writes
        # loader.weights[idx] in place at each selection.
        plan = plan_selection(cfg, splits)
    loader = FFCVTrainLoader(
        prepared.path("train"),
        n,
        cfg.batch_size,
        seed=cfg.seed,
        device=device,
        sampler=plan.sampler if plan else None,
        weights=plan.weights if plan else None,
        jpeg=train_encoding(splits.train_x) == "jpg",
    )
    loader.prepared = prepared
    return loader, plan.selection(cfg, splits, device, loader, dist) if plan else None
