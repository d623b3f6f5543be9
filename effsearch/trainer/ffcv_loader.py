"""FFCV as the training data loader (``loader: ffcv``).

Files. :func:`ensure_betons` writes a run's three splits as ``train.beton``,
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
:class:`effsearch.trainer.data.BatchAugment` as the PyTorch path (flip,
reflect pad-crop, normalisation, seeded). That is both identical augmentation
and the faster choice: FFCV's ``RandomHorizontalFlip``/``RandomTranslate``
are per-image numba loops on the CPU with numba's own, unseeded RNG, whereas
BatchAugment works on whole batches, on the GPU when there is one
(``benchmarks/ffcv_loader.py`` measures both; ``docs/benchmarks-ffcv.md``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import shutil
import sys
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
from effsearch.trainer import data as D

if TYPE_CHECKING:
    from effsearch.config import DatasetConfig, TrainConfig
    from effsearch.trainer.distributed import Context
    from effsearch.trainer.selection import SubsetSelection

# A ConfigError with the install line when ffcv or its compiled parts do not import (torch's
# thread count, which importing ffcv sets to one, is put back); the names below then import.
require_ffcv()
from ffcv.fields import IntField, NDArrayField, RGBImageField  # noqa: E402
from ffcv.fields.decoders import IntDecoder, NDArrayDecoder, SimpleRGBImageDecoder  # noqa: E402
from ffcv.loader import Loader, OrderOption  # noqa: E402
from ffcv.loader.epoch_iterator import EpochIterator  # noqa: E402
from ffcv.transforms import ToDevice, ToTensor, ToTorchImage  # noqa: E402

FORMAT = 1  # bump when the file layout changes: older folders become stale
SPLITS = ("train", "val", "test")


# -- files ----------------------------------------------------------------------


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
    return D.data_dir(data_root) / "ffcv" / dataset_folder(cfg) / split_key(cfg)


def _fallback_folder(cfg: TrainConfig) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "effsearch" / "ffcv" / dataset_folder(cfg) / split_key(cfg)


def _digest(x: torch.Tensor | D.DiskImages, y: torch.Tensor) -> str:
    h = hashlib.sha256()
    # A split left on disk is named by its cache and rows (reading every pixel would read it all).
    h.update(x.identity().encode() if isinstance(x, D.DiskImages) else np.ascontiguousarray(x.numpy()).data)
    h.update(np.ascontiguousarray(y.numpy().astype(np.int64)).data)
    return h.hexdigest()


def _arrays(splits: D.Splits) -> dict[str, tuple[torch.Tensor | D.DiskImages, torch.Tensor]]:
    return {
        "train": (splits.train_x, splits.train_y),
        "val": (splits.val_x, splits.val_y),
        "test": (splits.test_x, splits.test_y),
    }


def expected_meta(cfg: TrainConfig, splits: D.Splits) -> dict:
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


def stale_reason(folder: str | os.PathLike, expected: dict) -> str | None:
    """Why the files in ``folder`` cannot serve ``expected`` (None: they can)."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except FileNotFoundError:
        return "not prepared yet"
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


def train_encoding(x: torch.Tensor | D.DiskImages) -> str:
    """How a split's images are stored: a streamed RGB split JPEG-compressed (quality 90, FFCV's
    own writer: a folder larger than memory is read from disk compressed), else raw uint8."""
    return "jpg" if isinstance(x, D.DiskImages) and x.shape[1] == 3 else "raw"


class _Indexed:
    """What ffcv's writer reads: (image, label, index) per position; a split on disk is read a
    row at a time (H,W,C for a JPEG field)."""

    def __init__(self, x: torch.Tensor | D.DiskImages, y: torch.Tensor) -> None:
        self.disk = isinstance(x, D.DiskImages)
        self.hwc = train_encoding(x) == "jpg"
        self.x: Any = x if self.disk else np.ascontiguousarray(x.numpy())  # type: ignore[union-attr]
        self.y = y.numpy().astype(np.int64)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[np.ndarray, int, int]:
        image = self.x.row(i) if self.disk else self.x[i]
        return (np.ascontiguousarray(image.transpose(1, 2, 0)) if self.hwc else image), int(self.y[i]), int(i)


def write_beton(
    path: str | os.PathLike, x: torch.Tensor | D.DiskImages, y: torch.Tensor, progress: bool = False
) -> None:
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
    splits: D.Splits,
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
        fallback = _fallback_folder(cfg)
        why = f"{folder.parent}: {e.strerror or e}"
        if why not in _warned:  # once a process: every trial of a study meets it alike
            _warned.add(why)
            print(
                f"warning: cannot write the .beton files beside the dataset ({why}); writing them to "
                f"{fallback} instead",
                file=sys.stderr,
                flush=True,
            )
        prepared = ensure_betons(cfg, splits, fallback, force=force, progress=progress)
        return dataclasses.replace(prepared, instead_of=why)
    import fcntl

    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be writing the same folder
        if not force:
            reason = stale_reason(folder, expected)
            if reason is None:
                return Prepared(folder, False, None, time.perf_counter() - t0)
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
    return Prepared(folder, True, reason, time.perf_counter() - t0)


def _version() -> str:
    from effsearch.trainer.result import versions

    return versions().get("effsearch", "?")


def _ffcv_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ffcv")
    except PackageNotFoundError:  # pragma: no cover
        return "?"


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


# -- what effsearch.trainer.run calls ------------------------------------------------


def make_train_loader(
    cfg: TrainConfig,
    splits: D.Splits,
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
        from effsearch.trainer.selection import plan_selection

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
