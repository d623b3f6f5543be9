"""Datasets held in memory as uint8 tensors, split and augmented in batches (the built-in
datasets are read by ``datasets.py``).

Train/validation/test: the validation split is carved (stratified, seeded) from
the training set, unless the dataset brings one (a user's, ``userdata.py``); the
search only ever looks at validation accuracy.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from effsearch.config import ConfigError
from effsearch.config.sources import dataset_kind
from effsearch.trainer.data import memory, userdata
from effsearch.trainer.data.datasets import LOADERS, SHAPES, data_dir, no_folders_left
from effsearch.trainer.data.stratify import OWN_SPLIT, refusal, stratified_split
from effsearch.trainer.data.textsources import holds_texts
from effsearch.trainer.data.tokenizer import TokenShape, own_ids

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pathlib import Path

    from effsearch.config import DatasetConfig, TrainConfig
    from effsearch.trainer.data.lmdata import HeldOut, Streams
    from effsearch.trainer.data.sampler import SubsetSampler


class DiskImages:
    """A training split left on disk: rows ``index`` of a memory-mapped uint8 N,C,H,W cache
    (``userdata``'s), read when indexed. With ``loader: ffcv`` an image folder's training images
    are never all in memory: FFCV writes them to its .beton file a row at a time and streams
    batches from it; CORDS and quantization calibration read the rows they index."""

    dtype = torch.uint8

    def __init__(self, rows: userdata.Rows, index: np.ndarray) -> None:
        self.rows, self.index = rows, np.asarray(index)

    @property
    def shape(self) -> torch.Size:
        return torch.Size((len(self.index), *self.rows.shape[1:]))

    def __len__(self) -> int:
        return len(self.index)

    def numel(self) -> int:
        return int(np.prod(self.shape))

    def element_size(self) -> int:
        return 1

    def cpu(self) -> DiskImages:
        return self

    def row(self, i: int) -> np.ndarray:
        return self.rows[self.index[i : i + 1]][0]

    def __getitem__(self, idx: Any) -> torch.Tensor:
        if isinstance(idx, torch.Tensor):
            idx = idx.cpu().numpy()
        if isinstance(idx, (int, np.integer)):
            return torch.from_numpy(self.row(int(idx)).copy())
        return torch.from_numpy(np.ascontiguousarray(self.rows[self.index[idx]]))

    def identity(self) -> str:
        """What the rows are, for FFCV's staleness check without reading every pixel: the cache's
        files (their key hashes the source's files, sizes and mtimes) and the rows taken."""
        import hashlib

        h = hashlib.sha256(str(getattr(self.rows.array, "filename", id(self.rows.array))).encode())
        h.update(np.ascontiguousarray(self.rows.index[self.index]).astype(np.int64).data)
        return h.hexdigest()

    def sample(self, limit: int = 10_000) -> torch.Tensor:
        """Up to ``limit`` rows, evenly spaced: what the normalisation statistics are read from."""
        step = max(1, len(self) // limit)
        return self[np.arange(0, len(self), step)[:limit]]


@dataclass
class Splits:
    name: str
    train_x: torch.Tensor | DiskImages  # uint8 N,C,H,W
    train_y: torch.Tensor  # int64
    val_x: torch.Tensor
    val_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    train_index: np.ndarray  # positions in the source training set, for FFCV and CORDS lookups
    # Text: x are int32 token rows (N, max_length), padded with 0; what the model is built for.
    tokens: TokenShape | None = None
    # A language model: train_x is the training token stream (1-d), val and test are windows of
    # inputs and targets (N, max_length); what the validation score counts (bits per byte).
    held_out: HeldOut | None = None

    @property
    def channels(self) -> int:
        return int(self.train_x.shape[1])

    # Cached: a float copy of the whole training set costs ~0.2 s, once per process, not per trial.
    @functools.cached_property
    def mean(self) -> torch.Tensor:
        return self._pixels().float().mean(dim=(0, 2, 3)) / 255.0

    @functools.cached_property
    def std(self) -> torch.Tensor:
        return self._pixels().float().std(dim=(0, 2, 3)).clamp_min(1e-3) / 255.0

    @property
    def streamed(self) -> bool:
        """The training images stay on disk (``DiskImages``): only FFCV serves their batches."""
        return isinstance(self.train_x, DiskImages)

    def _pixels(self) -> torch.Tensor:
        # A streamed split's statistics come from up to 10,000 of its images, not a float copy of all.
        return self.train_x.sample() if isinstance(self.train_x, DiskImages) else self.train_x  # self.streamed


_CACHE: dict = {}


def _stratified_part(idx: np.ndarray, share: float, y: np.ndarray, classes: int, seed: int) -> np.ndarray:
    """``share`` of ``idx``, stratified by ``y`` (at least one image a class); all of it at 1."""
    keep = max(classes, int(round(share * len(idx))))
    if share >= 1.0 or keep >= len(idx):
        return idx
    return stratified_split(idx, y[idx], seed, train_size=keep)[0]


def _split(d: DatasetConfig, xtr: Any, ytr: np.ndarray, classes: int, given: Any) -> tuple:
    """(training positions, validation positions, validation images, validation labels), sorted:
    validation carved from the training set (stratified) unless the dataset ``given`` one, then the
    data_fraction and val_subset parts of each."""
    idx = np.arange(len(ytr))
    field, part = "dataset.val_fraction", ytr  # what is being split, for a refusal
    try:  # a user's small classes can be too small to stratify: a ConfigError, not a traceback
        if given is None:
            tr_idx, val_idx = stratified_split(idx, ytr, d.split_seed, test_size=d.val_fraction)
            xval, yval = xtr, ytr
        else:  # the dataset's own validation split, used as it is
            tr_idx, (xval, yval) = idx, given
            val_idx = np.arange(len(yval))
        field, part = "dataset.data_fraction", ytr[tr_idx]
        tr_idx = _stratified_part(tr_idx, d.data_fraction, ytr, classes, d.split_seed + 1)
        # Evaluated every eval_every epochs: in a tuning phase it can cost as much as training.
        field, part = "dataset.val_subset", yval[val_idx]
        val_idx = _stratified_part(val_idx, d.val_subset, yval, classes, d.split_seed + 2)
    except ValueError as e:
        raise _unsplittable(d, field, part, e) from None
    if d.data_fraction < 1:
        _few_a_class(d, np.bincount(ytr[tr_idx], minlength=classes))
    return np.sort(tr_idx), np.sort(val_idx), xval, yval


def _unsplittable(d: DatasetConfig, field: str, y: np.ndarray, error: ValueError) -> ConfigError:
    """Why ``_split`` could not carve ``field``'s stratified part of the labels ``y``, and what to do."""
    if field == "dataset.val_fraction":
        own = OWN_SPLIT.get((dataset_kind(d.name), "val"))
        what = f"a validation split of {d.val_fraction:g}"
        return refusal(field, y, d.val_fraction, what, "training images", own, error)
    share = d.data_fraction if field == "dataset.data_fraction" else d.val_subset
    unit = "training images" if field == "dataset.data_fraction" else "validation images"
    return refusal(field, y, share, f"a {field.removeprefix('dataset.')} of {share:g}", unit, None, error)


FEW_A_CLASS = 10  # training images a class below which data_fraction is warned about
_WARNED: set[tuple] = set()


def _few_a_class(d: DatasetConfig, counts: np.ndarray) -> None:
    """Warn, once a process, where ``dataset.data_fraction`` leaves a class fewer than FEW_A_CLASS
    training images: a run on so few trains without complaint, and what it learns is mostly noise."""
    least = int(counts.min())
    said = (d.name, d.path, d.data_fraction)
    if least < FEW_A_CLASS and said not in _WARNED:
        _WARNED.add(said)
        log.warning(
            f"dataset.data_fraction {d.data_fraction:g} leaves class {int(counts.argmin())} of {d.name} "
            f"{least} training image(s) (fewer than {FEW_A_CLASS}); raise data_fraction for a result that means something"
        )


def _cache_key(cfg: TrainConfig, folder: Path) -> tuple:
    """What ``load_splits`` returns depends on: the split's fields and the data folder."""
    d = cfg.dataset
    key: tuple = (
        d.name,
        d.data_fraction,
        d.val_fraction,
        d.val_subset,
        d.split_seed,
        d.image_size,
        d.synthetic_size,
        str(folder),
    )
    if (
        dataset_kind(d.name) != "builtin"
    ):  # a user's dataset: where it is and how it is read (streamed or not: the loader)
        key += (
            json.dumps(d.kwargs, sort_keys=True, default=str),
            d.path and os.path.abspath(os.path.expanduser(d.path)),
            d.test_fraction,
            d.image_column,
            d.label_column,
            cfg.loader,
            # text: what its token rows depend on
            d.text_column,
            d.split_column,
            repr(d.classes),
            d.tokenizer.name,
            d.tokenizer.vocab_size,
            d.tokenizer.path,
            d.max_length,
            d.group_column,
            d.val_tokens,
        )
    return key


def _raw(cfg: TrainConfig, folder: Path) -> userdata.UserData:
    """The dataset's images (arrays, or userdata.Rows: a user's cached images, read when indexed) or
    token rows, labels, classes, and its own validation split where it has one."""
    d = cfg.dataset
    kind = dataset_kind(d.name)
    if kind == "builtin":
        with no_folders_left(folder):
            xtr, ytr, xte, yte, classes = LOADERS[d.name](folder, cfg)
        return userdata.UserData(xtr, ytr, xte, yte, classes)
    from effsearch.trainer.data import text

    if kind == "import":  # called once: what it returns says whether it is text
        arrays = userdata.call(d)
        if holds_texts(arrays["x_train"]):
            return text.load(d, folder, arrays)
        return userdata.from_callable(arrays, d)
    return text.load(d, folder) if text.text_source(d) else userdata.load(d, folder)


def _resized(x: Any, size: int | None) -> torch.Tensor:
    """``x`` as a contiguous uint8 tensor (a writable copy), resized to size x size if it is not."""
    x = torch.from_numpy(np.array(x))
    if size and tuple(x.shape[-2:]) != (size, size):
        x = (
            torch.nn.functional.interpolate(x.float(), size=(size, size), mode="bilinear", align_corners=False)
            .round()
            .clamp(0, 255)
            .to(torch.uint8)
        )
    return x.contiguous()


def _side(d: DatasetConfig) -> int | None:
    """The square side every image is resized to (None: kept as it is)."""
    return d.image_size or (32 if d.name == "digits" else None)


def shape_of(d: DatasetConfig) -> tuple[int, int, tuple[int, int]] | None:
    """(channels, classes, (height, width)) of the splits ``d`` loads to, where that is known
    without loading them (the built-ins; an image folder's or an npz's headers); else None."""
    if dataset_kind(d.name) == "builtin":
        channels, classes, size = SHAPES[d.name]
    else:
        peeked = userdata.peek(d)
        if peeked is None:
            return None
        channels, classes, size = peeked
    side = _side(d)
    return channels, classes, (side, side) if side else size


def load_splits(cfg: TrainConfig, root: str | os.PathLike | None = None) -> Splits:
    """Load ``cfg.dataset`` and split it; cached per process (studies reuse it)."""
    d = cfg.dataset
    folder = data_dir(root)
    key = _cache_key(cfg, folder)
    if key in _CACHE:
        return _CACHE[key]
    from effsearch.trainer.data import lmdata, text

    if text.is_lm(d):
        _CACHE[key] = _streams(d, lmdata.load(d, folder))
        return _CACHE[key]
    u = _raw(cfg, folder)
    tr_idx, val_idx, xval, yval = _split(d, u.train_x, u.train_y, u.classes, u.val)
    if u.tokens is not None:  # token rows: nothing to resize, no images to stream
        t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (u.train_x[tr_idx], u.train_y[tr_idx])]
        v = [torch.from_numpy(np.ascontiguousarray(a)) for a in (xval[val_idx], yval[val_idx])]
        e = [torch.from_numpy(np.ascontiguousarray(a)) for a in (u.test_x, u.test_y)]
        splits = Splits(d.name, t[0], t[1], v[0], v[1], e[0], e[1], u.classes, tr_idx, tokens=u.tokens)
    else:
        splits = _images(cfg, u, tr_idx, val_idx, xval, yval)
    _CACHE[key] = splits
    return splits


def _streams(d: DatasetConfig, s: Streams) -> Splits:
    """A language model's splits: the training stream, validation and test windows (int64)."""
    t = [torch.from_numpy(a) for a in (s.train, s.val_x, s.val_y, s.test_x, s.test_y)]
    shape = TokenShape(s.vocab_size, d.max_length, causal=True, own=own_ids(d.tokenizer))
    none = torch.zeros(0, dtype=torch.long)
    return Splits(d.name, t[0], none, t[1], t[2], t[3], t[4], s.vocab_size, np.arange(0), shape, s.held_out)


def _images(
    cfg: TrainConfig, u: userdata.UserData, tr_idx: np.ndarray, val_idx: np.ndarray, xval: Any, yval: np.ndarray
) -> Splits:
    """The image splits, resized to ``dataset.image_size`` (the training images left on disk where
    FFCV streams them)."""
    d = cfg.dataset
    builtin = dataset_kind(d.name) == "builtin"
    xtr, ytr, xte, yte = u.train_x, u.train_y, u.test_x, u.test_y
    size = _side(d)
    shape = (xtr.shape[1], *((size, size) if size else xtr.shape[2:]))
    # An image folder's (or hf dataset's) decoded cache is a memory map: with loader ffcv its training
    # images stay there and FFCV streams them, so only validation and test must fit in memory.
    stream = (
        not builtin and cfg.loader == "ffcv" and isinstance(xtr, userdata.Rows) and tuple(xtr.shape[1:]) == tuple(shape)
    )
    if not builtin:  # only the images kept are read (from a memory map, for a folder): do they fit?
        memory.check_fits(
            (0 if stream else len(tr_idx)) + len(val_idx) + len(yte), shape, streams=isinstance(xtr, userdata.Rows)
        )
    train_x = DiskImages(cast(userdata.Rows, xtr), tr_idx) if stream else _resized(xtr[tr_idx], size)
    return Splits(
        d.name,
        train_x,
        torch.from_numpy(ytr[tr_idx]),
        _resized(xval[val_idx], size),
        torch.from_numpy(yval[val_idx]),
        _resized(xte, size),
        torch.from_numpy(yte),
        u.classes,
        tr_idx,
    )


# -- batches ------------------------------------------------------------------


class TensorImages(torch.utils.data.Dataset):
    """uint8 images in memory, fetched a batch at a time; made by :func:`tensor_images`.

    A torchvision ``VisionDataset`` too (the class ``tensor_images`` makes) so that Composer's
    RandAugment/AugMix can add their per-image transforms; without them, batches are sliced,
    not collated. ``weights`` (one per sample) are returned with the batch when set (CORDS).
    """

    def __init__(self, x: torch.Tensor | DiskImages, y: torch.Tensor) -> None:
        super().__init__(root="")  # type: ignore[call-arg]  # VisionDataset's, next in the made class
        self.x, self.y = x, y
        self.weights: torch.Tensor | None = None
        self.transform: Callable[[Any], Any] | None = None

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        return self.__getitems__([i])

    def __getitems__(self, idx: Sequence[int] | torch.Tensor) -> tuple[torch.Tensor, ...]:
        idx = torch.as_tensor(idx, dtype=torch.long)
        x = self.x[idx]
        if self.transform is not None:
            x = self._per_image(x)
        if self.weights is not None:
            return x, self.y[idx], self.weights[idx]
        return x, self.y[idx]

    def _per_image(self, x: torch.Tensor) -> torch.Tensor:
        from PIL import Image
        from torchvision.transforms.functional import pil_to_tensor

        out = []
        for img in x:
            arr = img.numpy()
            pil = Image.fromarray(arr[0] if arr.shape[0] == 1 else arr.transpose(1, 2, 0))
            assert self.transform is not None  # only called with one
            res = self.transform(pil)
            res = res if isinstance(res, torch.Tensor) else pil_to_tensor(res)
            if res.dtype != torch.uint8:  # AugMix returns floats in [0, 1] or [0, 255]
                res = (res * (255.0 if res.max() <= 1.0 else 1.0)).round().clamp(0, 255).to(torch.uint8)
            out.append(res.reshape(img.shape))
        return torch.stack(out)


@functools.cache
def _vision_images() -> type[TensorImages]:
    # Made on first use: importing torchvision takes seconds (it imports torch._dynamo), and bad
    # input (a user's data, a model path) is refused before any batch is served.
    from torchvision.datasets import VisionDataset

    return type("TensorImages", (TensorImages, VisionDataset), {})


def tensor_images(x: torch.Tensor | DiskImages, y: torch.Tensor) -> TensorImages:
    """A TensorImages of ``x`` and ``y`` that is also a torchvision ``VisionDataset``."""
    return _vision_images()(x, y)


def _passthrough(batch: Any) -> Any:
    return batch


def make_loader(
    x: torch.Tensor | DiskImages,
    y: torch.Tensor,
    batch_size: int,
    shuffle: bool,
    seed: int = 0,
    drop_last: bool = False,
    sampler: torch.utils.data.Sampler | None = None,
) -> torch.utils.data.DataLoader:
    ds = tensor_images(x, y)
    if sampler is None and shuffle:
        g = torch.Generator()
        g.manual_seed(seed)
        sampler = torch.utils.data.RandomSampler(ds, generator=g)
    elif sampler is None:
        sampler = torch.utils.data.SequentialSampler(ds)
    return torch.utils.data.DataLoader(
        ds, batch_size=batch_size, sampler=sampler, drop_last=drop_last, collate_fn=_passthrough, num_workers=0
    )


class DeviceBatches:
    """Training batches sliced from tensors that live on the device (cifar10-fast's habit).

    No DataLoader, no collation, no host-to-device copy per batch: one index
    permutation per epoch on the device, then one gather per batch. ``sampler``
    (CORDS's subset sampler) replaces the permutation when set; ``weights`` (one
    per sample, written in place by the selection) go with each batch. The
    selection writes the weights of each subset in place. With ``world > 1`` each
    rank serves its shard of the same order.
    """

    def __init__(
        self,
        x: torch.Tensor | DiskImages,
        y: torch.Tensor,
        batch_size: int,
        seed: int,
        device: str,
        sampler: SubsetSampler | None = None,
        weights: torch.Tensor | None = None,
        drop_last: bool = False,
        rank: int = 0,
        world: int = 1,
    ) -> None:
        self.x, self.y = x, y
        # Data-parallel: every rank draws the same order and takes every world-th index from
        # its rank on, the order padded by wrapping to a multiple of world (DistributedSampler's rule).
        self.rank, self.world = rank, world
        self.batch_size, self.device, self.sampler, self.weights = batch_size, device, sampler, weights
        self.drop_last = drop_last
        # The order is drawn on the host, once an epoch (0.5 ms for 54,000 samples), so that it
        # is the same on every device and the FFCV loader can serve the very same batches.
        self.gen = torch.Generator()
        self.gen.manual_seed(seed)
        self.epoch_state = self.gen.get_state()  # as the current epoch began (a checkpoint's data order)
        self.skip = 0  # batches the next epoch leaves out: a run resumed mid-epoch trained them
        # What code that asks a loader for its dataset sees (its length, the same weights tensor).
        self.dataset = tensor_images(x, y)
        self.dataset.weights = weights

    def _count(self) -> int:
        n = len(self.sampler) if self.sampler is not None else len(self.y)
        return -(-n // self.world)

    def __len__(self) -> int:
        n, b = self._count(), self.batch_size
        return n // b if self.drop_last and n >= b else -(-n // b)

    def order(self) -> torch.Tensor:
        """This epoch's order of sample positions (this rank's share of it), on the host."""
        if self.sampler is not None:
            order = torch.as_tensor(list(iter(self.sampler)), dtype=torch.long)
        else:
            self.epoch_state = self.gen.get_state()
            order = torch.randperm(len(self.y), generator=self.gen)
        if self.world > 1:
            pad = (-len(order)) % self.world
            if pad:
                order = torch.cat([order, order[:pad]])
            order = order[self.rank :: self.world]
        return order

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        order = self.order()
        if self.device != "cpu":
            order = order.pin_memory().to(self.device, non_blocking=True)
        weights = self.weights.to(self.device) if self.weights is not None else None  # once an epoch
        n, b = len(order), self.batch_size
        stop = n - n % b if self.drop_last and n >= b else n
        start, self.skip = self.skip * b, 0
        for i in range(start, stop, b):
            j = order[i : i + b]
            if weights is not None:
                yield self.x[j], self.y[j], weights[j]
            else:
                yield self.x[j], self.y[j]


def to_device(splits: Splits, device: str, max_bytes: int = 4 << 30) -> Splits:
    """``splits`` with its tensors on ``device``, kept for the process (a study's trials share
    them: one copy per worker, not one per trial). Data larger than ``max_bytes`` stays on
    the host, pinned, and is copied a batch at a time with ``non_blocking``."""
    if device == "cpu":
        return splits
    key = (id(splits), device)
    if key not in _ON_DEVICE:
        tensors: tuple[str, ...] = ("train_x", "train_y", "val_x", "val_y", "test_x", "test_y")
        if splits.streamed:  # the training images stay on disk: FFCV streams them to the device
            tensors = tensors[1:]
        size = sum(getattr(splits, t).numel() * getattr(splits, t).element_size() for t in tensors)
        move = (lambda t: t.to(device)) if size <= max_bytes else (lambda t: t.pin_memory())
        moved = dataclasses.replace(splits, **{t: move(getattr(splits, t)) for t in tensors})
        _ON_DEVICE[key] = (splits, moved)  # holding ``splits`` keeps its id from being reused
    return _ON_DEVICE[key][1]


_ON_DEVICE: dict = {}


class BatchAugment:
    """Move a uint8 batch to the device, scale, flip, pad-crop and normalise it.

    Runs as Composer's ``batch_transforms`` (before AFTER_DATALOADER), so every
    algorithm sees normalised float images; done on whole batches on the device.
    """

    def __init__(
        self,
        mean: torch.Tensor,
        std: torch.Tensor,
        device: str,
        flip: bool,
        crop_padding: int,
        train: bool,
        channels_last: bool = False,
        seed: int = 0,
    ) -> None:
        self.mean = torch.as_tensor(mean).view(1, -1, 1, 1).to(device)
        self.std = torch.as_tensor(std).view(1, -1, 1, 1).to(device)
        self.device = device
        self.flip = flip and train
        self.pad = crop_padding if train else 0
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed + 7)

    def __call__(self, batch: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        x, *rest = batch
        x = x.to(self.device, non_blocking=True).float().div_(255.0)
        n = x.shape[0]
        if self.flip:
            mask = torch.rand(n, 1, 1, 1, device=self.device, generator=self.gen) < 0.5
            x = torch.where(mask, x.flip(-1), x)
        if self.pad:
            x = random_crop(x, self.pad, self.gen)
        x = ((x - self.mean) / self.std).contiguous(memory_format=self.memory_format)
        return (x, *[r.to(self.device, non_blocking=True) for r in rest])


def random_crop(x: torch.Tensor, pad: int, gen: torch.Generator) -> torch.Tensor:
    """Pad by ``pad`` (reflect) and take one random crop per image, in one gather."""
    n, c, h, w = x.shape
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad), mode="reflect")
    dy = torch.randint(0, 2 * pad + 1, (n, 1), device=x.device, generator=gen)
    dx = torch.randint(0, 2 * pad + 1, (n, 1), device=x.device, generator=gen)
    rows = (dy + torch.arange(h, device=x.device)).view(n, 1, h, 1).expand(n, c, h, w + 2 * pad)
    cols = (dx + torch.arange(w, device=x.device)).view(n, 1, 1, w).expand(n, c, h, w)
    padded = padded.gather(2, rows)
    return padded.gather(3, cols)
