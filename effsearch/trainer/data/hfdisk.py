"""A dataset saved by ``datasets``' ``save_to_disk``, opened in one place for images and text alike:
the optional extra's refusal, a folder it cannot read and a dataset without a train split each
refused naming the field. Its splits are read as effsearch's train, val and test by their names
(``SPLIT_NAMES``; any other, as MNLI's ``validation_matched``, is left out with a warning). A
split whose ``ClassLabel`` is -1 throughout (datasets' mark for no label: GLUE's test splits) is
left out, so that one is carved from the training rows."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from effsearch.config import ConfigError

log = logging.getLogger(__name__)

# A split's name (an hf split, an image folder beside train/, a row's split column): effsearch's split.
SPLIT_NAMES = {"train": "train", "validation": "val", "valid": "val", "val": "val", "dev": "val", "test": "test"}
HF_EXTRA = "needs the optional extra hf (`uv sync --extra hf`, or `pip install 'effsearch[hf]'`)"


def load_splits(root: Path, name: str, label: str | None = None) -> dict[str, Any]:
    """The splits saved at ``root`` as effsearch's ``train``, ``val`` and ``test`` (a lone
    ``Dataset`` is ``train``), less those with no ``label`` (the label column); ``name`` is what
    ``dataset.name`` said, for the missing extra's message."""
    try:
        import datasets
    except ImportError:
        raise ConfigError("dataset.name", f"{name} {HF_EXTRA}") from None
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
        split = SPLIT_NAMES.get(given)
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
