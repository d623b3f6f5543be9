"""The .beton files FFCV reads (``loader: ffcv``): where they live, whether they are stale, and
writing them; ``ffcv_loader.py`` serves batches from them.

:func:`ensure_betons` writes a run's three splits as ``train.beton``,
``val.beton`` and ``test.beton`` (fields ``image``: the uint8 C,H,W array,
stored raw, so pixel-exact; ``label``; ``index``: the sample's position in its
split, which is how per-sample weights are looked up) plus ``meta.json``. They
live next to the dataset, in ``DATA/ffcv/DATASET/SPLITKEY/`` (the split key
names validation fraction, split seed, data fraction and image size, so runs
with other splits never share or overwrite files; for a user's dataset DATASET is
its name and a hash of where it is, :func:`dataset_folder`). ``meta.json`` records the
split parameters and a SHA-256 of every split's pixels and labels; a folder
whose record differs from the run's splits is *stale* and is written again.
Writing happens under a lock into a temporary folder that is then renamed, so
concurrent workers of a study neither collide nor read half-written files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from effsearch.config.machine import require_ffcv
from effsearch.config.sources import dataset_kind
from effsearch.trainer.data.splits import DiskImages, Splits, data_dir

if TYPE_CHECKING:
    from effsearch.config import DatasetConfig, TrainConfig

log = logging.getLogger(__name__)

# A ConfigError with the install line when ffcv or its compiled parts do not import (torch's
# thread count, which importing ffcv sets to one, is put back); the names below then import.
require_ffcv()
from ffcv.fields import IntField, NDArrayField, RGBImageField  # noqa: E402

FORMAT = 1  # bump when the file layout changes: older folders become stale
SPLITS = ("train", "val", "test")


def split_key(cfg: TrainConfig) -> str:
    """A folder name for the split parameters of ``cfg.dataset``."""
    d = cfg.dataset
    key = f"val{d.val_fraction:g}-seed{d.split_seed}-frac{d.data_fraction:g}"
    if d.val_subset < 1:  # a tuning phase's smaller validation split: its own files, not a rewrite
        key += f"-valsub{d.val_subset:g}"
    if d.image_size:
        key += f"-{d.image_size}px"
    if d.name == "synthetic":
        key += f"-n{d.synthetic_size}"
    if dataset_kind(d.name) != "builtin":  # carved from a source without a test split
        key += f"-test{d.test_fraction:g}"
    return key


def _user_source(d: DatasetConfig) -> dict:
    """Where a user's dataset comes from and how it is read (empty for a built-in)."""
    if dataset_kind(d.name) == "builtin":
        return {}
    return {
        "path": os.path.abspath(os.path.expanduser(d.path)) if d.path else None,
        "test_fraction": d.test_fraction,
        "image_column": d.image_column,
        "label_column": d.label_column,
    }


def dataset_folder(cfg: TrainConfig) -> str:
    """The folder of ``cfg.dataset``'s files under ``ffcv/``: a built-in's name; for a user's
    dataset a readable stem (the import path, or the kind and the path's last part) and a hash
    of name, path and columns, so that two folders never share files. No ':' or '/' in it."""
    d = cfg.dataset
    if dataset_kind(d.name) == "builtin":
        return d.name
    source = _user_source(d)
    stem = d.name if not source["path"] else f"{d.name}-{Path(source['path']).name}"
    digest = hashlib.sha256(json.dumps([d.name, source["path"], d.image_column, d.label_column]).encode())
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).lstrip(".-")[:60] + "-" + digest.hexdigest()[:12]


def default_folder(cfg: TrainConfig, data_root: str | os.PathLike | None = None) -> Path:
    """Where runs look for (and write) the .beton files: next to the dataset."""
    return data_dir(data_root) / "ffcv" / dataset_folder(cfg) / split_key(cfg)


def _fallback_folder(cfg: TrainConfig) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "effsearch" / "ffcv" / dataset_folder(cfg) / split_key(cfg)


def _digest(x: torch.Tensor | DiskImages, y: torch.Tensor) -> str:
    h = hashlib.sha256()
    # A split left on disk is named by its cache and rows (reading every pixel would read it all).
    h.update(x.identity().encode() if isinstance(x, DiskImages) else np.ascontiguousarray(x.numpy()).data)
    h.update(np.ascontiguousarray(y.numpy().astype(np.int64)).data)
    return h.hexdigest()


def _arrays(splits: Splits) -> dict[str, tuple[torch.Tensor | DiskImages, torch.Tensor]]:
    return {
        "train": (splits.train_x, splits.train_y),
        "val": (splits.val_x, splits.val_y),
        "test": (splits.test_x, splits.test_y),
    }


def expected_meta(cfg: TrainConfig, splits: Splits) -> dict:
    """What ``meta.json`` must say for the files to serve ``cfg``'s splits."""
    d = cfg.dataset
    return {
        "format": FORMAT,
        "dataset": {
            "name": d.name,
            "val_fraction": d.val_fraction,
            "split_seed": d.split_seed,
            "data_fraction": d.data_fraction,
            "image_size": d.image_size,
            "synthetic_size": d.synthetic_size if d.name == "synthetic" else None,
            **({"val_subset": d.val_subset} if d.val_subset < 1 else {}),
            **_user_source(d),
            **({"train_images": train_encoding(splits.train_x)} if splits.streamed else {}),
        },
        "splits": {
            name: {"count": len(y), "shape": list(x.shape[1:]), "sha256": _digest(x, y)}
            for name, (x, y) in _arrays(splits).items()
        },
    }


NOT_PREPARED = "not prepared yet"  # stale_reason's word for a folder of no files: written the first time


def stale_reason(folder: str | os.PathLike, expected: dict) -> str | None:
    """Why the files in ``folder`` cannot serve ``expected`` (None: they can)."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except FileNotFoundError:
        return NOT_PREPARED
    except (OSError, ValueError) as e:
        return f"meta.json unreadable ({e})"
    if meta.get("format") != expected["format"]:
        return f"file format {meta.get('format')} (now {expected['format']})"
    have, want = meta.get("dataset", {}), expected["dataset"]
    diffs = [f"{k} {have.get(k)!r} (now {v!r})" for k, v in want.items() if have.get(k) != v]
    if diffs:
        return "written for " + ", ".join(diffs)
    for name in SPLITS:
        info = meta.get("splits", {}).get(name, {})
        path = folder / f"{name}.beton"
        if not path.is_file():
            return f"{path.name} missing"
        if path.stat().st_size != info.get("bytes"):
            return f"{path.name} has {path.stat().st_size} bytes, meta.json says {info.get('bytes')}"
        if info.get("sha256") != expected["splits"][name]["sha256"]:
            return f"{name} split's contents differ (dataset files changed?)"
    return None


def train_encoding(x: torch.Tensor | DiskImages) -> str:
    """How a split's images are stored: a streamed RGB split JPEG-compressed (quality 90, FFCV's
    own writer: a folder larger than memory is read from disk compressed), else raw uint8."""
    return "jpg" if isinstance(x, DiskImages) and x.shape[1] == 3 else "raw"


class _Indexed:
    """What ffcv's writer reads: (image, label, index) per position; a split on disk is read a
    row at a time (H,W,C for a JPEG field)."""

    def __init__(self, x: torch.Tensor | DiskImages, y: torch.Tensor) -> None:
        self.disk = isinstance(x, DiskImages)
        self.hwc = train_encoding(x) == "jpg"
        self.x: Any = x if self.disk else np.ascontiguousarray(x.numpy())  # type: ignore[union-attr]
        self.y = y.numpy().astype(np.int64)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[np.ndarray, int, int]:
        image = self.x.row(i) if self.disk else self.x[i]
        return (np.ascontiguousarray(image.transpose(1, 2, 0)) if self.hwc else image), int(self.y[i]), int(i)


def write_beton(path: str | os.PathLike, x: torch.Tensor | DiskImages, y: torch.Tensor, progress: bool = False) -> None:
    """Write one split (uint8 N,C,H,W images, labels) as a .beton with an ``index`` field.

    ffcv's writer forks worker processes; here its one worker runs as a thread
    instead (no fork of a process running torch and numba threads, which numba's
    TBB pool warns about), and a failure in it is raised rather than waited on forever.
    """
    import ffcv.writer as W
    from ffcv.writer import DatasetWriter

    image = (
        RGBImageField(write_mode="jpg", jpeg_quality=90)
        if train_encoding(x) == "jpg"
        else NDArrayField(np.dtype("uint8"), tuple(int(s) for s in x.shape[1:]))
    )
    fields = {"image": image, "label": IntField(), "index": IntField()}
    sample_bytes = int(np.prod(x.shape[1:]))
    page = max(W.MIN_PAGE_SIZE, 1 << (4 * sample_bytes - 1).bit_length())  # ffcv's default is 8 MiB
    writer = DatasetWriter(str(path), fields, page_size=page, num_workers=1)
    quiet = functools.partial(W.tqdm, disable=not progress, desc=Path(path).name, leave=False)
    count, errors, threads = len(y), [], []

    class InThread(threading.Thread):
        def __init__(self, target: Callable[..., Any], args: tuple) -> None:
            super().__init__(target=target, args=args, daemon=True)
            self.worker_args = args  # Thread.run drops its own _args
            threads.append(self)

        def run(self) -> None:
            try:
                super().run()
            except BaseException as e:  # noqa: BLE001 - raised below, after ffcv's loop ends
                # text only: the traceback's frames hold views of ffcv's shared memory, which must close
                errors.append("".join(traceback.format_exception_only(e)).strip())
                done, allocations = self.worker_args[5], self.worker_args[6]  # see ffcv's _write_common
                allocations.put([])
                with done.get_lock():
                    done.value = count  # ffcv waits for exactly this count

    finalize = writer.finalize

    def finalize_after_join(allocations: Any) -> None:  # the worker's views of ffcv's shared memory are gone then
        for t in threads:
            t.join()
        finalize(allocations)

    writer.finalize = finalize_after_join
    with _patched(W, "tqdm", quiet), _patched(W, "Process", InThread):
        writer.from_indexed_dataset(_Indexed(x, y), chunksize=1000)
    if errors:
        raise RuntimeError(f"writing {path} failed: {errors[0]}")


@contextlib.contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


@dataclass
class Prepared:
    folder: Path
    written: bool  # False: up-to-date files were reused
    reason: str | None  # why they were (re)written
    seconds: float
    instead_of: str | None = None  # the default folder that could not be written, and why (the cache is used)

    def path(self, split: str) -> Path:
        return self.folder / f"{split}.beton"


_warned: set[str] = set()


def ensure_betons(
    cfg: TrainConfig,
    splits: Splits,
    folder: str | os.PathLike | None = None,
    data_root: str | os.PathLike | None = None,
    force: bool = False,
    progress: bool = False,
) -> Prepared:
    """Reuse the .beton files of ``cfg``'s splits, or write them (missing, stale or ``force``).

    ``folder`` defaults to :func:`default_folder`; when that cannot be written
    (a read-only data folder), the per-user cache is used instead.
    """
    t0 = time.perf_counter()
    expected = expected_meta(cfg, splits)
    explicit = folder is not None
    folder = Path(folder) if folder is not None else default_folder(cfg, data_root)
    reason = "forced" if force else stale_reason(folder, expected)
    if reason is None:
        return Prepared(folder, False, None, time.perf_counter() - t0)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        lock_path = folder.parent / f".{folder.name}.lock"
        lock = open(lock_path, "a")  # noqa: SIM115 - closed by the `with lock` below
    except OSError as e:
        if explicit:
            raise
        return _in_the_cache(cfg, splits, folder, e, force, progress)
    import fcntl

    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be writing the same folder
        if not force:
            reason = stale_reason(folder, expected)
            if reason is None:
                return Prepared(folder, False, None, time.perf_counter() - t0)
        _write_folder(folder, expected, splits, progress)
    return Prepared(folder, True, reason, time.perf_counter() - t0)


def _in_the_cache(
    cfg: TrainConfig, splits: Splits, folder: Path, error: OSError, force: bool, progress: bool
) -> Prepared:
    """``ensure_betons`` in the per-user cache, when ``folder`` (beside the dataset) cannot be written."""
    fallback = _fallback_folder(cfg)
    why = f"{folder.parent}: {error.strerror or error}"
    if why not in _warned:  # once a process: every trial of a study meets it alike
        _warned.add(why)
        log.warning("cannot write the .beton files beside the dataset (%s); writing them to %s instead", why, fallback)
    prepared = ensure_betons(cfg, splits, fallback, force=force, progress=progress)
    return dataclasses.replace(prepared, instead_of=why)


def _write_folder(folder: Path, expected: dict, splits: Splits, progress: bool) -> None:
    """Write ``splits``' files and their ``meta.json`` into a temporary folder, then rename it to
    ``folder`` (the caller holds the lock)."""
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        meta = dict(expected, written_by=f"effsearch {_version()}, ffcv {_ffcv_version()}")
        for name, (x, y) in _arrays(splits).items():
            write_beton(tmp / f"{name}.beton", x, y, progress=progress)
            meta["splits"][name]["bytes"] = (tmp / f"{name}.beton").stat().st_size
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        old = folder.parent / f".{folder.name}.old-{os.getpid()}"
        if folder.exists():
            folder.rename(old)  # a Loader that has the old files open keeps reading them
        tmp.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _version() -> str:
    from effsearch.trainer.result import versions

    return versions().get("effsearch", "?")


def _ffcv_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ffcv")
    except PackageNotFoundError:  # pragma: no cover
        return "?"
