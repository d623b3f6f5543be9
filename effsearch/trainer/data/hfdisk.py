"""A dataset saved by ``datasets``' ``save_to_disk``, or its parquet files (a ``.parquet`` file,
or a folder of them as a Hugging Face hub dataset is downloaded:
``data/train-00000-of-00001.parquet``, ``test/0000.parquet``), opened in one place for images and
text alike: the optional extra's refusal, a folder it cannot read and a dataset without a train
split each refused naming the field. A parquet file's split is its name before the first ``-``,
else its folder's name. Its splits are read as effsearch's train, val and test by their names
(``SPLIT_NAMES``; any other, as MNLI's ``validation_matched``, is left out with a warning). A
split whose ``ClassLabel`` is -1 throughout (datasets' mark for no label: GLUE's test splits) is
left out, so that one is carved from the training rows."""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from effsearch.config import ConfigError

log = logging.getLogger(__name__)

# A split's name (an hf split, an image folder beside train/, a row's split column): effsearch's split.
SPLIT_NAMES = {"train": "train", "validation": "val", "valid": "val", "val": "val", "dev": "val", "test": "test"}


def split_of(name: str) -> str | None:
    """effsearch's split for a split's name, read in any case (``Train/``, ``Test-….parquet``, as
    downloads name them), or None: not a split effsearch reads."""
    return SPLIT_NAMES.get(name.lower())


HF_EXTRA = "needs the optional extra hf (`uv sync --extra hf`, or `pip install 'effsearch[hf]'`)"


def load_splits(root: Path, name: str, label: str | None = None) -> dict[str, Any]:
    """The splits saved at ``root`` as effsearch's ``train``, ``val`` and ``test`` (a lone
    ``Dataset`` is ``train``), less those with no ``label`` (the label column); ``name`` is what
    ``dataset.name`` said, for the missing extra's message."""
    try:
        import datasets
    except ImportError:
        raise ConfigError("dataset.name", f"{name} {HF_EXTRA}") from None
    files = parquet_files(root)
    if files is not None:
        return kept(_parquet_splits(root, files), str(root), label, "dataset.path")
    try:
        loaded = datasets.load_from_disk(str(root))
    except Exception as e:  # noqa: BLE001 - datasets raises several kinds for a folder it cannot read
        raise ConfigError(
            "dataset.path", f"{root} is not a dataset written by datasets' save_to_disk ({type(e).__name__}: {e})"
        ) from None
    found = {"train": loaded} if isinstance(loaded, datasets.Dataset) else dict(loaded)
    return kept(found, str(root), label, "dataset.path")


def kept(found: dict[str, Any], where: str, label: str | None, field: str) -> dict[str, Any]:
    """The splits of ``found`` (``where``'s, by their own names) that effsearch reads, by its
    names; ``field`` is named where they cannot be read."""
    out: dict[str, Any] = {}
    named: dict[str, str] = {}
    for given, ds in found.items():
        split = split_of(given)
        if split is None:
            log.warning(
                "the %s split of %s is not read: effsearch reads train, validation (or valid, val, dev) and test",
                given,
                where,
            )
        elif split in out:
            raise ConfigError(field, f"{where} has the splits {named[split]} and {given}: both are {split}; keep one")
        elif split != "train" and label is not None and unlabelled(ds, label):
            log.warning(
                "the %s split of %s has no labels (%r is -1, datasets' mark for none, in every row): it is "
                "left out, and that split carved from the training rows instead",
                given,
                where,
                label,
            )
        else:
            out[split], named[split] = ds, given
    if "train" not in out:
        raise ConfigError(field, f"{where} has no train split (it has {', '.join(map(str, found))})")
    return out


def unlabelled(ds: Any, column: str) -> bool:
    """Whether ``column`` of the split ``ds`` is a ``ClassLabel`` that is -1 in every row."""
    features = getattr(ds, "features", None)  # a torch Dataset has none
    if not features:
        return False
    import datasets

    feature = features.get(column)
    return isinstance(feature, datasets.ClassLabel) and len(ds) > 0 and max(ds[column]) < 0


# What save_to_disk writes at a dataset's top: such a folder is read by load_from_disk, whatever else it holds.
SAVED = ("dataset_dict.json", "dataset_info.json", "state.json")


def is_parquet(path: Path) -> bool:
    """``path`` is a parquet file: the one file (not a folder) ``hf`` reads."""
    return path.is_file() and path.suffix == ".parquet"


def parquet_files(root: Path) -> list[Path] | None:
    """The parquet files ``root`` holds (itself, or a folder's, hidden ones left out), or None:
    ``root`` is a folder save_to_disk wrote, or holds no parquet file."""
    if root.is_file():
        return [root] if is_parquet(root) else None
    if any((root / name).exists() for name in SAVED):
        return None
    found = sorted(p for p in root.rglob("*.parquet") if not any(n.startswith(".") for n in p.relative_to(root).parts))
    return found or None


def _split_name(root: Path, file: Path) -> str:
    """``train-00000-of-00001.parquet``: train; ``test/0000.parquet``: test; a lone file: train.
    Split names are read in any case (``split_of``)."""
    if file == root:
        return "train"
    prefix = file.stem.split("-")[0]
    if split_of(prefix) is not None or len(file.relative_to(root).parts) == 1:
        return prefix
    return file.parent.name


def _parquet_splits(root: Path, files: list[Path]) -> dict[str, Any]:
    """Each split's files read into one in-memory ``datasets.Dataset`` (nothing cached on disk),
    its features those the files' metadata records (``ClassLabel`` names, ``Image``); a column of
    {bytes, path} structs written without that metadata is read as images all the same."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets.table import InMemoryTable

    by_split: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        by_split[_split_name(root, f)].append(f)
    if "train" not in {split_of(name) for name in by_split}:
        raise ConfigError(
            "dataset.path",
            f"{root} has no training parquet file: a file's split is its name before the first '-' "
            f"(train-00000-of-00001.parquet) or its folder (train/0000.parquet); it has {', '.join(sorted(by_split))}",
        )
    out = {}
    for split, group in by_split.items():
        parents = sorted({str(f.parent.relative_to(root)) for f in group if f != root})
        if len(parents) > 1:  # a hub repository of several configurations (GLUE's cola/, sst2/, ...)
            raise ConfigError(
                "dataset.path",
                f"{root} holds {split} files in {len(parents)} folders ({', '.join(p + '/' for p in parents[:4])}): "
                "the configurations of one repository, read one at a time: point dataset.path at one of them",
            )
        tables = []
        for f in group:
            try:
                tables.append(pq.read_table(f))
            except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds for a file it cannot read
                raise ConfigError("dataset.path", f"{f} is not a parquet file pyarrow reads ({e})") from None
        try:
            table = pa.concat_tables(tables, promote_options="default")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ConfigError("dataset.path", f"the {split} files of {root} differ in their columns ({e})") from None
        features = datasets.Features.from_arrow_schema(table.schema)
        ds = datasets.Dataset(InMemoryTable(table), info=datasets.DatasetInfo(features=features))
        for column, feature in features.items():
            if isinstance(feature, dict) and set(feature) == {"bytes", "path"}:
                ds = ds.cast_column(column, datasets.Image())
        out[split] = ds
    return out
