"""A callable's PyTorch datasets, read once into the arrays ``userdata.call`` returns.

An import path's callable may return map-style ``Dataset``s (or ``DataLoader``s: their
``dataset`` is read, their batching left to the trainer) instead of arrays: one (the training
split: validation and test are carved), a pair ``(train, test)``, a triple ``(train, val, test)``,
or a mapping by split name (read as a saved Hugging Face dataset's: ``hfdisk.kept``; a
``DatasetDict`` is one). Each item is ``(x, y)``, or a row (a mapping: a Hugging Face ``Dataset``'s)
read by ``dataset.image_column`` or ``text_column`` and ``label_column``: ``x`` a
PIL image, a tensor (``ToTensor``'s C,H,W floats in [0, 1] included) or an array, or a string (a
text; alone, without ``y``, a language model's document). Items are read in index order, once per
process, so the dataset's transform runs once per item: a random augmentation is drawn once and
frozen (said in a warning); effsearch's own augmentations are in the search space.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch

from effsearch.config import ConfigError
from effsearch.config.imports import raised
from effsearch.trainer.data import memory
from effsearch.trainer.data.decode import GRAY_MODES, UNDO_NORMALISATION, as_uint8, eight_bit
from effsearch.trainer.data.hfdisk import kept

log = logging.getLogger(__name__)

FIELD = "dataset.name"
BY_POSITION = {2: ("train", "test"), 3: ("train", "val", "test")}
RANDOM_TRANSFORMS = ("Random", "AutoAugment", "RandAugment", "TrivialAugment", "AugMix")
NORMALIZE_FIX = "leave Normalize out of its transform (effsearch normalises each batch itself)"
SAID_FROM = 10_000  # items: a read this long is said as it starts (Fashion-MNIST: ~15,000 items a second)


def is_dataset(v: Any) -> bool:
    """Is ``v`` a dataset to read item by item (not an array, a column or a list of values)?"""
    if isinstance(v, np.ndarray | torch.Tensor | str | bytes | list | tuple | Mapping) or hasattr(v, "to_numpy"):
        return False
    return isinstance(v, torch.utils.data.DataLoader | torch.utils.data.Dataset) or (
        hasattr(v, "__getitem__") and hasattr(v, "__len__")
    )


class Columns(NamedTuple):
    """Where a mapping item (a Hugging Face ``Dataset``'s row) keeps its image or text and its label."""

    image: str
    text: str
    label: str | None  # None: a language model's corpus, no labels

    @classmethod
    def of(cls, d: Any) -> Columns:
        return cls(d.image_column, d.text_column, d.label_column)


def splits_of(out: Any, source: str, label: str | None) -> dict[str, Any] | None:
    """The datasets ``out`` (what ``source`` returned) holds, by effsearch's split names; None
    when it holds none (arrays: ``userdata.call`` reads them). A mapping's keys are read as a saved
    Hugging Face dataset's splits are (``hfdisk.kept``; ``label``: the label column)."""
    if is_dataset(out):
        return {"train": out}
    if isinstance(out, tuple | list) and out and all(is_dataset(v) for v in out):
        if len(out) not in BY_POSITION:
            raise ConfigError(
                FIELD, f"{source} returned {len(out)} datasets; expected (train, test) or (train, val, test)"
            )
        return dict(zip(BY_POSITION[len(out)], out, strict=True))
    if isinstance(out, Mapping) and out and any(is_dataset(v) for v in out.values()):
        odd = next((k for k, v in out.items() if not is_dataset(v)), None)
        if odd is not None:
            raise ConfigError(
                FIELD, f"{source} returned a mapping of datasets whose {odd!r} is a {type(out[odd]).__name__}"
            )
        return kept({str(k): v for k, v in out.items()}, source, label, FIELD)
    return None


def read_all(splits: dict[str, Any], source: str, cols: Columns) -> dict[str, Any]:
    """The arrays ``userdata.call`` returns (x_train, y_train, ...), read from ``splits``."""
    arrays: dict[str, Any] = {}
    for split, ds in splits.items():
        x, y = read(ds, f"the {split} dataset of {source}", cols)
        arrays[f"x_{split}"] = x
        if y is not None:
            arrays[f"y_{split}"] = y
    texts = {isinstance(v, list) for k, v in arrays.items() if k.startswith("x_")}
    if len(texts) > 1:
        raise ConfigError(FIELD, f"the datasets of {source} mix texts and images; give one kind")
    return arrays


def read(ds: Any, where: str, cols: Columns) -> tuple[np.ndarray | list[str], np.ndarray | None]:
    """Every item of ``ds``: images (one uint8 array) or texts (a list), and labels (None: the
    items have none)."""
    ds = _map_style(ds, where)
    n = len(ds)
    t = time.perf_counter()
    if n >= SAID_FROM:
        log.info("reading the %d items of %s", n, where)
    x0, y0 = _item(ds, 0, where, cols)
    if y0 is None and not isinstance(x0, str):
        raise ConfigError(FIELD, f"the items of {where} are images without labels; each must be (image, label)")
    images = Images(n, x0, ds, where) if not isinstance(x0, str) else None
    texts: list[str] = []
    ys: list[Any] = []
    for i in range(n):
        x, y = (x0, y0) if i == 0 else _item(ds, i, where, cols)
        if (y is None) != (y0 is None):
            had = ("has no label", "has one") if y is None else ("has a label", "has none")
            raise ConfigError(FIELD, f"item {i} of {where} {had[0]} but item 0 {had[1]}")
        if isinstance(x, str) != (images is None):
            first = "an image" if images is not None else "a text"
            raise ConfigError(FIELD, f"item {i} of {where} is a {type(x).__name__} but item 0 is {first}")
        if images is not None:
            images.put(i, x)
        else:
            texts.append(x)
        ys.append(y)
    _warn_frozen(ds, where)
    if n >= SAID_FROM:
        log.info("read %s in %.1f s", where, time.perf_counter() - t)
    labels = None if y0 is None else np.array(ys)
    return (texts, labels) if images is None else (images.out, labels)


def first_is_text(ds: Any, where: str, cols: Columns) -> bool:
    """Whether ``ds``'s first item holds a text (the others are not read)."""
    ds = _map_style(ds, where)
    return isinstance(_item(ds, 0, where, cols)[0], str)


def _map_style(ds: Any, where: str) -> Any:
    """``ds`` to read item by item (a DataLoader's dataset); an iterable or empty one refused."""
    if isinstance(ds, torch.utils.data.DataLoader):
        ds = ds.dataset
    if isinstance(ds, torch.utils.data.IterableDataset):
        raise ConfigError(FIELD, f"{where} is an IterableDataset; give a map-style Dataset (with __len__), or arrays")
    if len(ds) == 0:
        raise ConfigError(FIELD, f"{where} is empty")
    return ds


def images_of(xs: Any, where: str) -> np.ndarray:
    """A list of images (PIL images, tensors or arrays) as one uint8 array, read as a dataset's items."""
    first = _x(xs[0], 0, where)
    images = Images(len(xs), first, None, where)
    for i, x in enumerate(xs):
        x = first if i == 0 else _x(x, i, where)
        if isinstance(x, str):
            raise ConfigError(FIELD, f"item {i} of {where} is a text but item 0 is an image")
        images.put(i, x)
    return images.out


class Images:
    """A dataset's images as one uint8 array, filled an item at a time (no list of them, no float
    copy): floats in [0, 1] scaled as they come; a PIL dataset's grayscale images made RGB where
    a colour one comes (as an image folder's)."""

    def __init__(self, n: int, x0: np.ndarray, ds: Any, where: str) -> None:
        self.where = where
        self.fix = NORMALIZE_FIX if "Normalize" in transforms(ds) else UNDO_NORMALISATION  # once, not an item a time
        first = self.uint8(x0, 0)
        need, limit = n * first.size, memory.memory_limit()
        if need > limit:
            raise ConfigError(
                FIELD,
                f"the {n:,} images of {where} ({'x'.join(map(str, first.shape))}) take "
                f"{memory.human_bytes(need)} in memory, more than the {memory.human_bytes(limit)} this machine "
                "can give them: give smaller images (a Resize in its transform) or fewer",
            )
        self.pil = x0.dtype == np.uint8 and x0.ndim == 3 and x0.shape[0] in (1, 3)  # PIL: C,H,W
        self.out = np.empty((n, *first.shape), np.uint8)

    def put(self, i: int, x: np.ndarray) -> None:
        x = self.uint8(x, i)
        if self.pil and x.shape[1:] == self.out.shape[2:] and x.shape[0] != self.out.shape[1]:
            if x.shape[0] == 1:
                x = np.repeat(x, 3, axis=0)
            else:  # the first colour image: those before it were grayscale
                self.out = np.repeat(self.out, 3, axis=1)
        if x.shape != self.out.shape[1:]:
            raise ConfigError(
                FIELD,
                f"item {i} of {self.where} is {'x'.join(map(str, x.shape))} but item 0 is "
                f"{'x'.join(map(str, self.out.shape[1:]))}; give images of one size (a Resize in its transform)",
            )
        self.out[i] = x

    def uint8(self, x: np.ndarray, i: int) -> np.ndarray:
        """Item ``i``'s image as uint8 (``decode.as_uint8``: ToTensor's floats in [0, 1] scaled)."""
        return as_uint8(x, f"item {i} of {self.where}", FIELD, self.fix)


def _item(ds: Any, i: int, where: str, cols: Columns) -> tuple[Any, Any]:
    """Item ``i`` as (x, y): an image as an array (a PIL image as uint8 C,H,W), a label as a scalar."""
    try:
        item = ds[i]
    except Exception as e:  # noqa: BLE001 - the user's code raised: its error, and where, without a traceback
        raise ConfigError(FIELD, f"reading item {i} of {where} raised {raised(e)}") from None
    if isinstance(item, Mapping):
        x, y = _columns(item, i, where, cols)
    elif isinstance(item, tuple | list):
        if len(item) != 2:
            raise ConfigError(FIELD, f"item {i} of {where} has {len(item)} parts; items must be (x, label) pairs")
        x, y = item
    else:
        x, y = item, None
    return _x(x, i, where), _label(y, i, where)


def _columns(item: Mapping, i: int, where: str, cols: Columns) -> tuple[Any, Any]:
    """A row's (x, y) by the dataset's columns: its text where it has one, else its image."""
    if isinstance(item.get(cols.text), str):
        x = item[cols.text]
    elif cols.image in item:
        x = item[cols.image]
    else:
        raise ConfigError(
            "dataset.image_column",
            f"item {i} of {where} has the columns {', '.join(map(str, item))}; neither dataset.image_column "
            f"({cols.image!r}) nor dataset.text_column ({cols.text!r}) is one of them",
        )
    if cols.label is None:
        return x, None
    if cols.label not in item:
        raise ConfigError(
            "dataset.label_column",
            f"item {i} of {where} has the columns {', '.join(map(str, item))}, not {cols.label!r} "
            "(null: a language model's corpus)",
        )
    return x, item[cols.label]


def _x(x: Any, i: int, where: str) -> Any:
    if isinstance(x, str | np.ndarray):
        return x
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if hasattr(x, "convert") and hasattr(x, "mode"):  # a PIL image
        im = eight_bit(x)
        a = np.asarray(im.convert("L" if im.mode in GRAY_MODES else "RGB"))
        return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
    raise ConfigError(
        FIELD, f"item {i} of {where} holds a {type(x).__name__}; expected a PIL image, a tensor, an array or a text"
    )


def _label(y: Any, i: int, where: str) -> Any:
    if y is None or isinstance(y, str | bool | int | float | np.generic):
        return y
    if (isinstance(y, np.ndarray) and y.size == 1) or (isinstance(y, torch.Tensor) and y.numel() == 1):
        return y.item()
    raise ConfigError(FIELD, f"the label of item {i} of {where} is a {type(y).__name__}; expected one integer or name")


def transforms(ds: Any) -> str:
    """The text of ``ds``'s transforms (``repr``), those of the datasets it wraps included: a
    ``Subset`` (``random_split``'s) or a ``ConcatDataset`` has none of its own."""
    seen: set[int] = set()
    text: list[str] = []
    todo = [ds]
    while todo:
        d = todo.pop()
        if d is None or id(d) in seen or len(seen) > 64:
            continue
        seen.add(id(d))
        tf = getattr(d, "transform", None)
        if tf is not None:
            text.append(repr(tf))
        todo += [getattr(d, "dataset", None), *(getattr(d, "datasets", None) or [])]
    return "\n".join(text)


def _warn_frozen(ds: Any, where: str) -> None:
    """A warning when ``ds``'s transform draws at random: read once, each item keeps one draw."""
    if any(name in transforms(ds) for name in RANDOM_TRANSFORMS):
        log.warning(
            "%s: its transform draws at random, and each item was read once, so each keeps one draw "
            "(augmentations frozen); leave them out: effsearch searches its own",
            where,
        )
