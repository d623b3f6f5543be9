"""Images decoded with PIL into uint8 C,H,W arrays: one channel mode and size for a whole
dataset, read from the headers first (``plan``), then the pixels in threads (``decode``; PIL
decodes without the GIL). ``effsearch.trainer.data.userdata`` decodes image folders and ``hf``
datasets through here."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from effsearch.config import ConfigError

GRAY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N", "F"})
WIDE_MODES = frozenset({"I", "I;16", "I;16B", "I;16L", "I;16N"})  # 16-bit (PNG, TIFF) and 32-bit integer pixels
CHUNK = 256  # images per task of the decoding threads


@dataclass
class Part:
    """One split's images before decoding: file paths or encoded bytes, labels, names for messages."""

    sources: Sequence[str | bytes]
    labels: np.ndarray
    names: list[str]


def _open(source: str | bytes) -> Any:
    from PIL import Image

    return Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)


def header(source: str | bytes, name: str) -> tuple[tuple[int, int], str]:
    """(width, height) and mode of one image, read from its header; ``name`` for the message."""
    try:
        with _open(source) as im:  # reads the header only
            return im.size, im.mode
    except Exception as e:  # noqa: BLE001 - PIL raises many kinds for a damaged file: name the file
        raise ConfigError("dataset.path", f"cannot read image {name}: {type(e).__name__}: {e}") from None


def eight_bit(im: Any) -> Any:
    """A 16-bit or float grayscale image as 8-bit "L", by torchvision's conventions (``to_dtype``
    with ``scale=True``): 16 bits keep their high byte, floats are 0..1. PIL's own convert clips
    instead: a 16-bit image came out nearly all 255 and a 0..1 float image all 0."""
    from PIL import Image

    if im.mode in WIDE_MODES:
        a = np.asarray(im).astype(np.int64)
        return Image.fromarray((np.clip(a, 0, 65535) >> 8).astype(np.uint8))
    if im.mode == "F":
        a = np.nan_to_num(np.asarray(im, dtype=np.float32))
        return Image.fromarray((np.clip(a, 0, 1) * 255).round().astype(np.uint8))
    return im


UNDO_NORMALISATION = "undo a normalisation, e.g. x * std + mean"


def as_uint8(x: np.ndarray, name: str, field: str, fix: str = UNDO_NORMALISATION) -> np.ndarray:
    """Images ``x`` (``name``'s, for the message) as uint8: integers in 0..255 cast, floats in [0, 1]
    scaled (in slices: no float copy of the whole array); anything else refused naming ``field``,
    with its range and ``fix``."""
    if x.dtype == np.uint8:
        return x
    integer, floating = np.issubdtype(x.dtype, np.integer), np.issubdtype(x.dtype, np.floating)
    lo, hi = (float(x.min()), float(x.max())) if x.size and (integer or floating) else (0.0, 0.0)
    if integer and 0 <= lo and hi <= 255:
        return x.astype(np.uint8)
    if floating and 0 <= lo and hi <= 1:  # NaN fails both comparisons: refused below
        out = np.empty(x.shape, np.uint8)
        for i in range(0, len(x), 1024):
            np.rint(x[i : i + 1024] * 255, out=out[i : i + 1024], casting="unsafe")
        return out
    values = f" with values {lo:g}..{hi:g}" if integer or floating else ""
    if floating and np.isnan(x).any():
        first = int(np.flatnonzero(np.isnan(x.reshape(len(x), -1)).any(axis=1))[0])
        values, fix = f" holding NaN (first in image {first})", "replace the NaN pixels (np.nan_to_num)"
    raise ConfigError(
        field,
        f"{name} is {x.dtype}{values}; images must be uint8 0..255 (integers in that range, and floats in "
        f"[0, 1], are converted): {_fix_for(x, integer, floating, lo, hi, fix)}",
    )


def _fix_for(x: np.ndarray, integer: bool, floating: bool, lo: float, hi: float, fix: str) -> str:
    """What to do with pixels as_uint8 refused: the given ``fix`` (undo a normalisation) where
    values below 0 say one was applied; else what their range says they are."""
    if x.dtype == np.bool_:
        return "booleans: give x.astype(np.uint8) * 255"
    if floating and 0 <= lo and hi <= 255:
        return "floats of 0..255: give x.astype(np.uint8), or x / 255"
    if integer and 0 <= lo:
        return "more than 8 bits a pixel: scale them to 0..255, e.g. (x >> 8).astype(np.uint8) for 16 bits"
    return fix


def _pixels(source: str | bytes, name: str, mode: str, size: tuple[int, int]) -> np.ndarray:
    """One image as uint8 C,H,W in ``mode``, ``size`` (W, H)."""
    from PIL import Image

    try:
        with _open(source) as im:
            im = eight_bit(im)
            im = im.convert(mode) if im.mode != mode else im
            if im.size != size:
                im = im.resize(size, Image.Resampling.BILINEAR)
            a = np.asarray(im)
    except Exception as e:  # noqa: BLE001 - as in header
        raise ConfigError("dataset.path", f"cannot read image {name}: {type(e).__name__}: {e}") from None
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


def _in_threads(parts: dict[str, Part], work: Callable[[str, int, int], Any]) -> list:
    """``work(split, start, stop)`` over chunks of every split, in threads (PIL decodes without the GIL)."""
    jobs = [(s, i, min(i + CHUNK, len(p.labels))) for s, p in parts.items() for i in range(0, len(p.labels), CHUNK)]
    pool = ThreadPoolExecutor(min(8, os.cpu_count() or 1))
    try:
        return list(pool.map(lambda job: work(*job), jobs))
    finally:
        pool.shutdown(cancel_futures=True)  # after a bad image, the rest is not decoded for nothing


def plan(parts: dict[str, Part], image_size: int | None) -> tuple[str, tuple[int, int]]:
    """The one mode and (W, H) every image is decoded to, from the headers alone."""

    def headers(split: str, start: int, stop: int) -> list[tuple[tuple[int, int], str, str]]:
        part = parts[split]
        return [(*header(part.sources[i], part.names[i]), part.names[i]) for i in range(start, stop)]

    first: dict[tuple[int, int], str] = {}  # each size, with the first image of it (for the message)
    gray = True
    for chunk in _in_threads(parts, headers):
        for size, mode, name in chunk:
            gray = gray and mode in GRAY_MODES
            first.setdefault(size, name)
    mode = "L" if gray else "RGB"
    if image_size:
        return mode, (image_size, image_size)
    if len(first) > 1:
        (a, an), (b, bn) = list(first.items())[:2]
        raise ConfigError(
            "dataset.image_size",
            f"images differ in size ({an} is {a[0]}x{a[1]}, {bn} is "
            f"{b[0]}x{b[1]}; {len(first)} sizes in all): set dataset.image_size "
            "to resize every image to that square side",
        )
    return mode, next(iter(first))


def decode(parts: dict[str, Part], mode: str, size: tuple[int, int], outs: dict[str, np.ndarray]) -> None:
    def work(split: str, start: int, stop: int) -> None:
        part, out = parts[split], outs[split]
        for i in range(start, stop):
            out[i] = _pixels(part.sources[i], part.names[i], mode, size)

    _in_threads(parts, work)
