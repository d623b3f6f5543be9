"""The built-in datasets' readers, and where their files are looked for.

Each reader takes the data folder and the config and returns the raw arrays (``Raw``): uint8
train and test images (N,C,H,W), int64 labels, the class count; ``LOADERS`` maps
``dataset.name`` to its reader. Data that is not there and cannot be downloaded is a
``DataMissing`` (a ``ConfigError`` on ``dataset.name``) that leaves no folders behind.
``data.py`` splits what these return.
"""

from __future__ import annotations

import contextlib
import gzip
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from effsearch.config import ConfigError

if TYPE_CHECKING:
    from effsearch.config import TrainConfig

    # (train images, train labels, test images, test labels, classes)
    Raw = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]

DATA_ENV = "EFFSEARCH_DATA_DIR"


class DataMissing(ConfigError):
    pass


def data_dir(explicit: str | os.PathLike | None = None) -> Path:
    """--data-dir, else $EFFSEARCH_DATA_DIR, else a per-user cache folder."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "effsearch" / "data"


def _digits(_root: Path, _cfg: TrainConfig) -> Raw:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images * (255.0 / 16.0)).round().astype(np.uint8)[:, None]
    y = d.target.astype(np.int64)
    # digits ships no test split: hold out a fixed, stratified 20%.
    from effsearch.trainer.data.stratify import stratified_split

    tr, te = stratified_split(np.arange(len(y)), y, 1234, test_size=0.2)
    return x[tr], y[tr], x[te], y[te], 10


def _read_idx(path: Path, offset: int) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def _find_idx(root: Path, stem: str) -> Path | None:
    for folder in (root / "fashion-mnist", root / "FashionMNIST" / "raw", root):
        for name in (stem + ".gz", stem):
            if (folder / name).is_file():
                return folder / name
    return None


def _fashion_mnist(root: Path, _cfg: TrainConfig) -> Raw:
    stems = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
    paths = [_find_idx(root, s) for s in stems]
    failed = ""
    if None in paths:
        try:  # a network may exist: let torchvision fetch its usual layout
            import torchvision

            torchvision.datasets.FashionMNIST(str(root), download=True)
            paths = [_find_idx(root, s) for s in stems]
        except Exception as e:  # noqa: BLE001 - any failure means "not here": said below, with its cause
            failed = f" ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else 'no message'})"
    if None in paths:
        raise DataMissing(
            "dataset.name",
            f"Fashion-MNIST not found in {root} (looked for "
            f"{root}/fashion-mnist/*.gz and {root}/FashionMNIST/raw/), and it could not "
            f"be downloaded{failed}. Copy the four IDX files (train-images-idx3-ubyte.gz, ...) there, "
            f"or point --data-dir / ${DATA_ENV} at the folder that holds them.",
        )
    found = cast("list[Path]", paths)  # none missing (checked above)
    xtr = _read_idx(found[0], 16).reshape(-1, 1, 28, 28)
    ytr = _read_idx(found[1], 8).astype(np.int64)
    xte = _read_idx(found[2], 16).reshape(-1, 1, 28, 28)
    yte = _read_idx(found[3], 8).astype(np.int64)
    return xtr, ytr, xte, yte, 10


def _cifar(root: Path, cfg: TrainConfig) -> Raw:
    import torchvision

    cls = torchvision.datasets.CIFAR10 if cfg.dataset.name == "cifar10" else torchvision.datasets.CIFAR100
    try:
        tr = cls(str(root), train=True, download=False)
    except RuntimeError:
        try:
            tr = cls(str(root), train=True, download=True)
        except Exception as e:  # noqa: BLE001 - a download fails many ways (no network, disk, checksum): all say "not here"
            why = str(e).splitlines()[0][:200] if str(e) else "no message"
            raise DataMissing(
                "dataset.name",
                f"{cfg.dataset.name} not found in {root} and the download "
                f"failed ({type(e).__name__}: {why}). Put the torchvision layout (e.g. "
                f"{root}/cifar-10-batches-py) there or point --data-dir / ${DATA_ENV} at it.",
            ) from None
    te = cls(str(root), train=False, download=False)
    n = 10 if cfg.dataset.name == "cifar10" else 100
    return (
        tr.data.transpose(0, 3, 1, 2).copy(),
        np.asarray(tr.targets, np.int64),
        te.data.transpose(0, 3, 1, 2).copy(),
        np.asarray(te.targets, np.int64),
        n,
    )


def _synthetic(_root: Path, cfg: TrainConfig) -> Raw:
    """Learnable but not trivial: class templates plus noise, 3x16x16."""
    rng = np.random.default_rng(12345)
    classes = 10
    templates = rng.uniform(40, 215, size=(classes, 3, 16, 16))
    n = cfg.dataset.synthetic_size
    n_test = max(classes * 4, n // 5)

    def make(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        r = np.random.default_rng(seed)
        y = np.arange(count) % classes
        x = templates[y] + r.normal(0, 60, size=(count, 3, 16, 16))
        return np.clip(x, 0, 255).astype(np.uint8), y.astype(np.int64)

    xtr, ytr = make(n, 1)
    xte, yte = make(n_test, 2)
    return xtr, ytr, xte, yte, classes


LOADERS = {
    "digits": _digits,
    "fashion-mnist": _fashion_mnist,
    "cifar10": _cifar,
    "cifar100": _cifar,
    "synthetic": _synthetic,
}
# What each reader returns, known without reading it: (channels, classes, (height, width)).
SHAPES = {
    "digits": (1, 10, (8, 8)),
    "fashion-mnist": (1, 10, (28, 28)),
    "cifar10": (3, 10, (32, 32)),
    "cifar100": (3, 100, (32, 32)),
    "synthetic": (3, 10, (16, 16)),
}


def _folders(root: Path) -> set[Path]:
    return {Path(d) for d, _, _ in os.walk(root)}


@contextlib.contextmanager
def no_folders_left(folder: Path) -> Iterator[None]:
    """Refused data (not there, and its download failed) leaves no folders behind: torchvision
    makes its tree (FashionMNIST/raw) before it downloads. Only empty ones go: a file is kept."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    root = missing[-1] if missing else folder
    before = _folders(root)
    try:
        yield
    except ConfigError:
        for made in sorted(_folders(root) - before, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):  # not empty
                made.rmdir()
        raise
