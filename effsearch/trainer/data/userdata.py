"""Datasets of the user's own, loaded into the uint8 N,C,H,W arrays the built-ins give
:func:`effsearch.trainer.data.splits.load_splits`.

``dataset.name`` says where the data is (``config.sources.dataset_kind``):

* ``imagefolder``: ``dataset.path`` holds class folders (torchvision's ImageFolder layout: the
  sorted class names are the labels 0..K-1), either directly or under ``train/`` with optional
  ``val/`` (or ``valid/``, ``validation/``, ``dev/``) and ``test/`` folders of the same classes. Images (.png .jpg .jpeg .bmp .gif .webp
  .tif .tiff, any case; hidden files and folders skipped) are decoded once with PIL to one
  channel mode: ``L`` (1 channel) when every image is grayscale, else ``RGB`` (alpha dropped,
  palette images count as colour), and resized to ``dataset.image_size`` when set.
* ``npz``: a ``.npz`` file of ``x_train``, ``y_train``, ``x_test``, ``y_test`` (and optionally
  ``x_val``, ``y_val``); shapes as :func:`images` says; labels integers, or names (strings: the
  training split's, sorted, are classes 0..K-1, as hf's).
* ``hf``: a folder written by ``datasets``' ``save_to_disk``: a DatasetDict with ``train`` and
  optionally ``validation`` (or ``valid``, ``val``, ``dev``) and ``test``, or one Dataset (the training
  split); columns ``dataset.image_column`` (images) and ``dataset.label_column`` (integer labels, or
  strings: the training split's, sorted, are classes 0..K-1).
* ``package.module:callable``: ``callable()`` returns ``(x_train, y_train, x_test, y_test)`` or
  a mapping with those keys (and optionally ``x_val``, ``y_val``): numpy arrays, torch tensors,
  pandas columns or lists (images: PIL images too); labels as an npz's. Or PyTorch (or Hugging
  Face) datasets, each read once into such arrays (``torchsets``).

A source without a test split has one carved off, stratified, by ``dataset.test_fraction``
(seeded by ``dataset.split_seed``); a validation split it has is used as it is, else
``load_splits`` carves one by ``dataset.val_fraction``. The classes are the class folders of an
imagefolder, else max label + 1 of the training split.

Decoded images (imagefolder, hf) are cached on disk as .npy files under
``DATA/imagefolder-cache/KEY/`` (``hf-cache`` for hf), KEY a hash of the source's absolute path,
its files with their sizes and mtimes, ``image_size`` and the channel rule: a second run and
every study worker memory-map them in about a second. They are decoded straight into the cache
files, and a run reads from them only the images it keeps (``dataset.data_fraction``), so the
decoded dataset needs disk, not memory; :func:`effsearch.trainer.data.memory.check_fits` refuses a run whose images do not fit.

Bad input is a ConfigError naming the dataset field at fault, raised before any training.
"""

from __future__ import annotations

import errno
import inspect
import logging
import os
import stat
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from effsearch.config import ConfigError
from effsearch.config.imports import load_object, raised
from effsearch.config.sources import dataset_kind
from effsearch.trainer.data import memory, torchsets
from effsearch.trainer.data.decode import GRAY_MODES, Part, as_uint8, header
from effsearch.trainer.data.hfdisk import is_parquet, load_splits, split_of
from effsearch.trainer.data.imagecache import decoded
from effsearch.trainer.data.stratify import OWN_SPLIT, refusal, stratified_split
from effsearch.trainer.data.textsources import holds_texts
from effsearch.trainer.data.tokenizer import TokenShape

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
ARRAYS = ("x_train", "y_train", "x_test", "y_test")
# What a callable's mapping must hold: its training split (a test split it lacks is carved, as
# from one training Dataset or a lone .parquet file).
NEEDED = ("x_train", "y_train")


class Rows:
    """Rows ``index`` of ``array``, read only when indexed: a split carved from a memory-mapped
    cache costs memory for the images a run keeps, not for the whole source."""

    def __init__(self, array: np.ndarray, index: np.ndarray) -> None:
        self.array, self.index = array, index

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.index), *self.array.shape[1:])

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        return np.asarray(self.array[self.index[idx]])

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return np.asarray(self.array[self.index], dtype=dtype)


Images = np.ndarray | Rows  # uint8 N,C,H,W


@dataclass
class UserData:
    """A user's dataset as ``load_splits`` takes it: images (or token rows), int64 labels
    0..classes-1, the validation split (images, labels) when the source has one, and for text
    what its token rows are (``tokens``; None: images)."""

    train_x: Images
    train_y: np.ndarray
    test_x: Images
    test_y: np.ndarray
    classes: int
    val: tuple[Images, np.ndarray] | None = None
    tokens: TokenShape | None = None


def load(d: Any, cache_root: Path) -> UserData:
    """Load the dataset ``d`` (a DatasetConfig) names; decoded images are cached under ``cache_root``."""
    kind = dataset_kind(d.name)
    if kind == "import":
        return from_callable(call(d), d)
    root = existing_path(d)
    if kind == "npz":
        return _from_arrays(_read_npz(root), "dataset.path", str(root), d)
    if not root.is_dir() and not (kind == "hf" and is_parquet(root)):
        raise ConfigError("dataset.path", f"{root} is a file; {kind} reads a folder (hf: or a .parquet file)")
    if kind == "imagefolder":
        parts, classes, files = _scan_folder(root)
        settings = {"image_size": d.image_size}
        found, count = decoded(
            cache_root / "imagefolder-cache", root, files, settings, d.image_size, lambda: (parts, len(classes))
        )
    else:
        settings = {"image_size": d.image_size, "image_column": d.image_column, "label_column": d.label_column}
        skipped: list[str] = []
        listed = _files(root, skipped, everything=True) if root.is_dir() else [(str(root), root.stat())]
        _warn_skipped(root, skipped)
        found, count = decoded(
            cache_root / "hf-cache", root, listed, settings, d.image_size, lambda: _hf_parts(d, root)
        )
    return _assemble(found, count, d)


def existing_path(d: Any) -> Path:
    """``dataset.path`` as an absolute path that exists. A relative one is read from the current
    folder (the configs under configs/ are written to be run from the repository's root), and a
    refusal names that folder: a study or a best.yaml run from elsewhere misses its data."""
    given = Path(d.path or "").expanduser()
    path = given.absolute()
    if not path.exists():
        where = "" if given.is_absolute() else f" ({str(given)!r} is read from the current folder, {Path.cwd()})"
        raise ConfigError("dataset.path", f"{path} does not exist{where}")
    return path


def peek(d: Any) -> tuple[int, int, tuple[int, int]] | None:
    """(channels, classes, (height, width)) of the dataset ``d`` names, read without decoding or
    loading it: an image folder's class folders and first image's header (3 channels if that
    image is colour, else 1: one colour image makes the folder RGB, so 1 may still become 3), an
    npz's headers and training labels. None for other sources, or where the source is not as
    expected (its load then says what is wrong)."""
    kind = dataset_kind(d.name)
    if kind not in ("imagefolder", "npz") or not d.path:
        return None
    root = Path(d.path).expanduser().absolute()
    try:
        return _peek_folder(root) if kind == "imagefolder" else _peek_npz(root)
    except (ConfigError, OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None


def _peek_folder(root: Path) -> tuple[int, int, tuple[int, int]] | None:
    splits, classes = _class_folders(root, [])
    first = next(_walk(splits["train"] / classes[0], []), None) if len(classes) > 1 else None
    if first is None:
        return None
    (width, height), mode = header(first[0], first[0])
    return (1 if mode in GRAY_MODES else 3), len(classes), (height, width)


def _peek_npz(path: Path) -> tuple[int, int, tuple[int, int]] | None:
    shape, _ = _npz_headers(path, ["x_train"])["x_train"]
    with np.load(path, allow_pickle=False) as npz:
        named = _named_labels({"train": npz["y_train"]}, "y_train", "dataset.path")["train"]
        y = labels(named, "y_train", "dataset.path")
    if not len(y) or len(shape) not in (3, 4):
        return None
    if len(shape) == 3:
        return 1, int(y.max()) + 1, (shape[1], shape[2])
    first, last = shape[1] in (1, 3), shape[3] in (1, 3)
    if first == last:
        return None
    c, h, w = shape[1:] if first else (shape[3], shape[1], shape[2])
    return c, int(y.max()) + 1, (h, w)


# -- arrays: npz and callables -------------------------------------------------------


def images(x: Any, name: str, field: str) -> np.ndarray:
    """``x`` as uint8 N,C,H,W. Accepted: N,H,W (grayscale), N,C,H,W and N,H,W,C with C 1 or 3.
    A 4-d array is channels-first when axis 1 is 1 or 3 and the last axis is not, channels-last
    in the opposite case; any other shape (both or neither 1 or 3) is refused as ambiguous.
    Integers in 0..255 of another type are taken as they are, floats in [0, 1] scaled by 255 (as
    a float image file's are); other values are refused with their range."""
    x = as_uint8(_numpy(x, name, field), name, field)
    if x.ndim == 3 and len(x):
        return x[:, None]
    if x.ndim == 4 and len(x):
        first, last = x.shape[1] in (1, 3), x.shape[3] in (1, 3)
        if first != last:
            return x if first else x.transpose(0, 3, 1, 2)
    raise ConfigError(
        field,
        f"{name} has shape {tuple(x.shape)}; accepted: N,H,W (grayscale), N,C,H,W or "
        "N,H,W,C with C 1 or 3 (channels-first when axis 1 is 1 or 3 and the last axis is not)",
    )


def labels(y: Any, name: str, field: str) -> np.ndarray:
    """``y`` as int64 labels >= 0 (integers, or floats that are whole numbers)."""
    y = _numpy(y, name, field)
    if y.ndim == 2 and y.shape[1] == 1:  # Keras keeps labels as N,1
        y = y[:, 0]
    if y.ndim != 1:
        raise ConfigError(field, f"{name} has shape {tuple(y.shape)}; labels must be one integer per image")
    if not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.bool_)):
        whole = np.issubdtype(y.dtype, np.floating) and bool(np.all(np.isfinite(y) & (y == np.round(y))))
        if not whole:
            raise ConfigError(field, f"{name} is {y.dtype}; labels must be integers 0..K-1")
    y = y.astype(np.int64)
    if len(y) and y.min() < 0:
        raise ConfigError(field, f"{name} has label {int(y.min())}; labels must be integers 0..K-1")
    return y


def _numpy(v: Any, name: str, field: str) -> np.ndarray:
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().numpy()
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, list | tuple) and all(isinstance(e, int | float | str | bool | np.generic) for e in v):
        return np.asarray(v)  # labels as a list
    raise ConfigError(
        field, f"{name} is a {type(v).__name__}; expected a numpy array, a torch tensor, a pandas column or a list"
    )


def from_callable(arrays: dict[str, Any], d: Any) -> UserData:
    """The images an import path's callable returned (``call``), checked."""
    return _from_arrays(arrays, "dataset.name", f"{d.name}()", d)


def call(d: Any, needs: tuple[str, ...] = NEEDED) -> dict[str, Any]:
    """What the callable ``d.name`` (an import path; ``d`` a DatasetConfig) returns, as a mapping
    of x_train, y_train, ... (``needs``: the keys it must have; a language model's corpus needs
    x_train only). Datasets it returns are read into those arrays (``torchsets``)."""
    out, source = _returned(d), f"{d.name}()"
    datasets = torchsets.splits_of(out, source, d.label_column)
    if datasets is not None:
        return torchsets.read_all(datasets, source, torchsets.Columns.of(d))
    return _arrays(_by_name(out, source, needs), source)


def returns_texts(d: Any) -> bool:
    """Whether the callable ``d.name`` returns texts: its x_train, or its training dataset's first
    item (the rest not read: the model's probe asks this before the run reads the data)."""
    out, source = _returned(d), f"{d.name}()"
    datasets = torchsets.splits_of(out, source, d.label_column)
    if datasets is not None:
        return torchsets.first_is_text(datasets["train"], f"the train dataset of {source}", torchsets.Columns.of(d))
    x = _by_name(out, source, NEEDED)["x_train"]
    return holds_texts(x.to_numpy() if _column(x) else x)


def _returned(d: Any) -> Any:
    """What the callable ``d.name`` returns; its own error a ConfigError naming dataset.name."""
    fn = load_object(d.name, "dataset.name")
    kwargs = d.kwargs or {}
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as e:  # a keyword it does not take: dataset.kwargs's, not its own code's
        raise ConfigError("dataset.kwargs", f"{d.name}() cannot take {sorted(kwargs)}: {e}") from None
    except ValueError:  # no signature to read (a builtin): its call says
        pass
    try:
        return fn(**kwargs)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code raised: its error, and where, without a traceback
        raise ConfigError("dataset.name", f"{d.name}() raised {raised(e)}") from None


def _by_name(out: Any, source: str, needs: tuple[str, ...]) -> dict[str, Any]:
    """The arrays ``out`` (what ``source`` returned) holds, by name: a mapping with ``needs``, or
    the four of ARRAYS in order."""
    if isinstance(out, Mapping):
        missing = [k for k in needs if k not in out]
        if missing:
            raise ConfigError(
                "dataset.name",
                f"{source} returned a mapping without {', '.join(missing)}; it needs {', '.join(needs)} (and "
                "x_test, y_test or x_val, y_val where it has them)",
            )
        if "y_train" in needs:  # labelled: each split's images or texts with their labels
            _given_splits(out, "dataset.name", source)
        return dict(out)
    if isinstance(out, tuple | list) and len(out) == 4:
        return dict(zip(ARRAYS, out, strict=True))
    what = (
        f"a {type(out).__name__} of {len(out)}"
        if isinstance(out, tuple | list)
        else f"{type(out).__name__} {repr(out)[:60]}"
    )
    raise ConfigError(
        "dataset.name",
        f"{source} returned {what}; expected (x_train, y_train, x_test, y_test), a mapping with those keys, "
        "or PyTorch datasets",
    )


def _column(v: Any) -> bool:
    """A pandas (or polars) column: read as numpy by its ``to_numpy``."""
    return hasattr(v, "to_numpy") and not isinstance(v, np.ndarray | torch.Tensor)


def _arrays(out: dict[str, Any], source: str) -> dict[str, Any]:
    """A pandas (or polars) column returned for an array read as numpy (its ``to_numpy``): texts
    and labels are often a DataFrame's; a list of images (PIL images, tensors or arrays) as one
    uint8 array (``torchsets.images_of``). ``source``: what returned them, for messages."""
    arrays = {}
    for k, v in out.items():
        if _column(v):
            v = v.to_numpy()
        if k.startswith("x_") and _image_list(v):
            v = torchsets.images_of(v, f"{k} of {source}")
        arrays[k] = v
    return arrays


def _image_list(v: Any) -> bool:
    """A list (or an object array: a DataFrame's column) of images, not of texts."""
    listed = isinstance(v, list | tuple) or (isinstance(v, np.ndarray) and v.dtype == object and v.ndim == 1)
    return listed and len(v) > 0 and not isinstance(v[0], str)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        npz = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - numpy raises several kinds for a file it cannot read
        raise ConfigError("dataset.path", f"{path} is not a readable .npz file ({type(e).__name__}: {e})") from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ConfigError("dataset.path", f"{path} holds one array (.npy); npz needs a .npz of {', '.join(ARRAYS)}")
    with npz:
        missing = [k for k in ARRAYS if k not in npz.files]
        if missing:
            raise ConfigError(
                "dataset.path",
                f"{path} has no array {missing[0]!r} (it has {', '.join(npz.files)}); npz needs {', '.join(ARRAYS)}",
            )
        names = [k for k in (*ARRAYS, "x_val", "y_val") if k in npz.files]
        need, limit = _npz_bytes(path, names), memory.memory_limit()
        if need > limit:  # numpy reads .npz members whole: only smaller arrays help here
            raise ConfigError(
                "dataset.path",
                f"the arrays of {path} take {memory.human_bytes(need)} in memory, more than the "
                f"{memory.human_bytes(limit)} this machine can give them; save fewer or smaller "
                "images (or an imagefolder, whose decoded images live on disk)",
            )
        try:
            return {k: npz[k] for k in names}
        except Exception as e:  # noqa: BLE001 - a damaged member, or one of objects
            raise ConfigError("dataset.path", f"cannot read the arrays of {path} ({type(e).__name__}: {e})") from None


def _npz_bytes(path: Path, names: list[str]) -> int:
    """The arrays' size in memory, from their .npy headers (nothing decompressed)."""
    try:
        headers = _npz_headers(path, names)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return 0  # np.load then says what is wrong
    return sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in headers.values())


def _npz_headers(path: Path, names: list[str]) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """(shape, dtype) of each array ``names`` of the .npz ``path``, read from its .npy header."""
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in names:
            with z.open(name + ".npy") as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, _, dtype = read(f)
                out[name] = (tuple(shape), dtype)
    return out


def _from_arrays(arrays: dict[str, Any], field: str, source: str, d: Any) -> UserData:
    """Checked arrays (``source``: where they came from, for messages) as the user's splits."""
    pairs = [("train", "x_train", "y_train")]
    pairs += [(split, f"x_{split}", f"y_{split}") for split in _given_splits(arrays, field, source)]
    parts = {}
    raw = {split: _numpy(arrays[yn], f"{yn} of {source}", field) for split, _, yn in pairs}
    named = _named_labels(raw, f"the y arrays of {source}", field)  # string labels: sorted, as hf's
    for split, xn, yn in pairs:
        x, y = images(arrays[xn], f"{xn} of {source}", field), labels(named[split], f"{yn} of {source}", field)
        if len(x) != len(y):
            raise ConfigError(field, f"{xn} of {source} has {len(x)} images but {yn} has {len(y)} labels")
        parts[split] = (x, y)
    x0 = parts["train"][0]
    for split, (x, _) in parts.items():
        if x.shape[1] != x0.shape[1] or (x.shape[2:] != x0.shape[2:] and not d.image_size):
            raise ConfigError(
                "dataset.image_size" if x.shape[1] == x0.shape[1] else field,
                f"x_{split} images of {source} are {'x'.join(map(str, x.shape[1:]))} but x_train's are "
                f"{'x'.join(map(str, x0.shape[1:]))}; the channels must agree (and the sizes, "
                "unless dataset.image_size resizes them)",
            )
    return _assemble(parts, _class_count({s: y for s, (_, y) in parts.items()}, field, source), d)


def _given_splits(arrays: Mapping[str, Any], field: str, source: str) -> list[str]:
    """The splits besides train that ``arrays`` holds (test, val), each as x and y together; one
    without the other refused naming ``field``. A split left out is carved (a callable's lone
    training Dataset, a mapping of x_train and y_train)."""
    given = []
    for split in ("test", "val"):
        xn, yn = f"x_{split}", f"y_{split}"
        if (xn in arrays) != (yn in arrays):
            raise ConfigError(field, f"{xn} and {yn} go together; {source} has only one of them")
        if xn in arrays:
            given.append(split)
    return given


def _class_count(ys: dict[str, np.ndarray], field: str, source: str) -> int:
    """max label + 1 of the training split; the other splits' labels must be among them."""
    if not len(ys["train"]):
        raise ConfigError(field, f"the training split of {source} is empty")
    k = int(ys["train"].max()) + 1
    seen = set(np.unique(ys["train"]).tolist())
    if len(seen) < 2:
        raise ConfigError(
            field, f"the training labels of {source} hold one class ({k - 1}); a classifier needs at least two"
        )
    for split, y in ys.items():
        if len(y) and int(y.max()) >= k:
            raise ConfigError(
                field,
                f"the {split} labels of {source} go up to {int(y.max())} but the training "
                f"labels only to {k - 1}: labels must be 0..K-1, K set by the training split",
            )
        unseen = sorted(set(np.unique(y).tolist()) - seen)
        if unseen:  # below the top label: its score counted a class the model never saw as wrong, silently
            raise ConfigError(
                field,
                f"label {unseen[0]} is in the {split} split of {source} but no training label is: a "
                "classifier cannot learn a class it never sees",
            )
    if len(seen) < k:
        gaps = sorted(set(range(k)) - seen)
        log.warning(
            "%s: no training sample has label %s of 0..%d: the model gets %d output(s) it never learns "
            "(labels are class indices 0..K-1)",
            source,
            ", ".join(map(str, gaps[:5])) + (", ..." if len(gaps) > 5 else ""),
            k - 1,
            len(gaps),
        )
    return k


def _assemble(parts: Mapping[str, tuple[np.ndarray, np.ndarray]], classes: int, d: Any) -> UserData:
    """The splits ``load_splits`` takes, a test split carved off (stratified) when the source has none."""
    xte: Images
    x, y = parts["train"]
    if "test" in parts:
        (xte, yte), keep = parts["test"], None
    else:
        try:
            keep, held = stratified_split(np.arange(len(y)), y, d.split_seed + 3, test_size=d.test_fraction)
        except ValueError as e:  # a class too small to stratify
            own = OWN_SPLIT.get((dataset_kind(d.name), "test"))
            what = f"a test split of {d.test_fraction:g}"
            raise refusal("dataset.test_fraction", y, d.test_fraction, what, "images", own, e) from None
        keep, held = np.sort(keep), np.sort(held)
        xte, yte = Rows(x, held), y[held]
    xtr, ytr = (x, y) if keep is None else (Rows(x, keep), y[keep])
    return UserData(xtr, ytr, xte, yte, classes, parts.get("val"))


# -- images: imagefolder and hf --------------------------------------------------------


def _entries(folder: Path, skipped: list[str]) -> Iterator[tuple[os.DirEntry, os.stat_result | None]]:
    """The entries of ``folder`` that are read, sorted by name, each with its stat (None: a folder).
    Hidden ones are skipped (macOS's ``._x.jpg`` are not images), and so are symbolic links to
    folders (added to ``skipped``): one may lead out of the dataset, or back into it, a loop
    that would be listed forever. A link that leads nowhere (broken, or to itself) is a
    ConfigError naming it when it is named like an image; else it is skipped as any other file."""
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        if not entry.is_symlink():
            yield entry, None if entry.is_dir() else entry.stat()
            continue
        try:
            st = os.stat(entry.path)
        except OSError as e:
            if entry.name.lower().endswith(IMAGE_EXTENSIONS):
                why = "leads back to itself (a loop)" if e.errno == errno.ELOOP else "leads to nothing (broken)"
                raise ConfigError(
                    "dataset.path",
                    f"{entry.path} is a symbolic link to {os.readlink(entry.path)!r} that {why}; fix or remove it",
                ) from None
            continue
        if stat.S_ISDIR(st.st_mode):
            skipped.append(entry.path)
        else:
            yield entry, st


def _subfolders(folder: Path, skipped: list[str]) -> list[str]:
    return [e.name for e, st in _entries(folder, skipped) if st is None]


def _walk(folder: Path, skipped: list[str], everything: bool = False) -> Iterator[tuple[str, os.stat_result]]:
    """(path, stat) of the image files (``everything``: all files) under ``folder``, sorted."""
    for entry, st in _entries(folder, skipped):
        if st is None:
            yield from _walk(Path(entry.path), skipped, everything)
        elif everything or entry.name.lower().endswith(IMAGE_EXTENSIONS):
            yield entry.path, st


def _files(folder: Path, skipped: list[str], everything: bool = False) -> list[tuple[str, os.stat_result]]:
    return list(_walk(folder, skipped, everything))


def _warn_skipped(root: Path, skipped: list[str]) -> None:
    if skipped:
        shown = ", ".join(skipped[:3]) + (f" and {len(skipped) - 3} more" if len(skipped) > 3 else "")
        log.warning(
            f"{root}: skipped {len(skipped)} symbolic link(s) to folders ({shown}): a link may lead out of "
            "the dataset or back into it (a loop), so none is followed; link the image files instead, or "
            "point dataset.path at the real folder"
        )


def _class_folders(root: Path, skipped: list[str]) -> tuple[dict[str, Path], list[str]]:
    """The split folders of an imagefolder (``train`` always) and its class names. Split folders
    are named in any case (Train/, Test/ as many downloads have them: they had been two classes)."""
    tops = _subfolders(root, skipped)
    named = {t: split_of(t) for t in tops}
    if "train" in named.values():
        stray = [t for t in tops if named[t] is None]
        if stray:
            raise ConfigError(
                "dataset.path",
                f"{root} has train/ and also {', '.join(t + '/' for t in stray)}: "
                "beside train/ only val/ (or valid/, validation/, dev/) and test/ (of the same class folders) may be",
            )
        for split, what in (("train", "training"), ("val", "validation"), ("test", "test")):
            same = [t for t in tops if named[t] == split]
            if len(same) > 1:
                raise ConfigError(
                    "dataset.path", f"{root} has {' and '.join(t + '/' for t in same)}: one {what} folder, not two"
                )
        splits = {str(named[t]): root / t for t in tops}
    elif any(t.lower() in ("val", "test") for t in tops):  # valid/, validation/ without train/: classes
        raise ConfigError(
            "dataset.path", f"{root} has val/ or test/ but no train/: put the training images in {root}/train/CLASS/"
        )
    else:
        splits = {"train": root}
    return splits, _subfolders(splits["train"], skipped)


def _scan_folder(root: Path) -> tuple[dict[str, Part], list[str], list[tuple[str, os.stat_result]]]:
    """The imagefolder's splits (labels from the class folders), class names and files."""
    skipped: list[str] = []
    splits, classes = _class_folders(root, skipped)
    if len(classes) < 2:
        loose = len(_files(splits["train"], [])) - sum(len(_files(splits["train"] / c, [])) for c in classes)
        what = f"one class folder ({classes[0]}/)" if classes else "no class folders"
        links = f" (symbolic links to folders are not followed: {', '.join(skipped[:3])})" if skipped else ""
        raise ConfigError(
            "dataset.path",
            f"{splits['train']} has {what}{f' and {loose} loose images' if loose else ''}{links}; "
            "an imagefolder needs a folder per class (at least two), e.g. "
            f"{root}/cats/1.png and {root}/dogs/1.png",
        )
    parts, files = {}, []
    for split, top in splits.items():
        present = _subfolders(top, skipped if split != "train" else [])
        unknown = [c for c in present if c not in classes]
        if unknown:
            raise ConfigError(
                "dataset.path",
                f"{top} has class folders {', '.join(unknown)} that "
                f"{splits['train']} has not; val/ and test/ use train/'s classes",
            )
        sources, ys = [], []
        for label, name in enumerate(classes):
            if name not in present:
                continue
            found = _files(top / name, skipped)
            if not found:
                raise ConfigError(
                    "dataset.path", f"class folder {top / name} holds no images ({' '.join(IMAGE_EXTENSIONS)})"
                )
            sources += [p for p, _ in found]
            ys += [label] * len(found)
            files += found
        parts[split] = Part(sources, np.array(ys, np.int64), sources)
    _warn_skipped(root, skipped)
    return parts, classes, files


def _hf_parts(d: Any, root: Path) -> tuple[dict[str, Part], int]:
    """The splits of a saved ``datasets`` dataset, images as their encoded bytes (or files)."""
    found = load_splits(root, repr(d.name), d.label_column)
    import datasets  # present: load_splits refused its absence

    parts, raw_labels = {}, {}
    for split, ds in found.items():
        for column, field in ((d.image_column, "dataset.image_column"), (d.label_column, "dataset.label_column")):
            if column not in ds.column_names:
                raise ConfigError(
                    field,
                    f"the {split} split of {root} has no column {column!r}; its columns: {', '.join(ds.column_names)}",
                )
        if not isinstance(ds.features[d.image_column], datasets.Image):
            raise ConfigError(
                "dataset.image_column",
                f"column {d.image_column!r} holds {ds.features[d.image_column]}, not images (datasets.Image)",
            )
        raw = list(ds.cast_column(d.image_column, datasets.Image(decode=False))[d.image_column])
        names = [f"{split} row {i} of {root}" for i in range(len(raw))]
        missing = [
            n for r, n in zip(raw, names, strict=True) if not r or (r.get("bytes") is None and not r.get("path"))
        ]
        if missing:
            raise ConfigError("dataset.image_column", f"{missing[0]} has no image")
        sources = [r["bytes"] if r.get("bytes") is not None else r["path"] for r in raw]
        raw_labels[split] = np.asarray(list(ds[d.label_column]))
        parts[split] = Part(sources, raw_labels[split], names)
    for split, y in _named_labels(raw_labels, f"column {d.label_column!r}", "dataset.label_column").items():
        column = f"column {d.label_column!r} of the {split} split"
        parts[split].labels = labels(y, column, "dataset.label_column")
    return parts, _class_count({s: p.labels for s, p in parts.items()}, "dataset.label_column", str(root))


def _named_labels(ys: dict[str, np.ndarray], where: str, field: str) -> dict[str, np.ndarray]:
    """String labels as classes 0..K-1: the training split's labels in sorted order, as a text
    dataset's are (``text.py``); integer labels as they are (``where``: the labels, for messages)."""
    if ys["train"].dtype.kind not in "USO" or not all(isinstance(v, str) for v in ys["train"].tolist()):
        return ys
    index = {name: i for i, name in enumerate(sorted(set(ys["train"].tolist())))}
    for split, y in ys.items():
        unseen = next((str(v) for v in y.tolist() if str(v) not in index), None)
        if unseen is not None:
            raise ConfigError(
                field,
                f"label {unseen!r} of {where} is in the {split} split but no training row has it: "
                "a classifier cannot learn a class it never sees",
            )
    return {split: np.array([index[str(v)] for v in y.tolist()], np.int64) for split, y in ys.items()}
