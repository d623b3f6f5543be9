"""A dataset saved by ``datasets``' ``save_to_disk``, opened in one place for images and text alike:
the optional extra's refusal, a folder it cannot read and a dataset without a train split each
refused naming the field. A split whose ``ClassLabel`` is -1 throughout (datasets' mark for no
label: GLUE's test splits) is left out, so that one is carved from the training rows."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from effsearch.config import ConfigError

log = logging.getLogger(__name__)

HF_EXTRA = "needs the optional extra hf (`uv sync --extra hf`, or `pip install 'effsearch[hf]'`)"


def load_splits(root: Path, name: str, label: str | None = None) -> dict[str, Any]:
    """The splits saved at ``root`` by name (a lone ``Dataset`` is ``train``), less those with no
    ``label`` (the label column); ``name`` is what ``dataset.name`` said, for the missing extra's
    message."""
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
    if "train" not in found:
        raise ConfigError("dataset.path", f"{root} has no train split (it has {', '.join(found)})")
    for split in [s for s in found if s != "train" and label is not None and unlabelled(found[s], label)]:
        log.warning(
            "the %s split of %s has no labels (%r is -1, datasets' mark for none, in every row): it is "
            "left out, and that split carved from the training rows instead",
            split,
            root,
            label,
        )
        del found[split]
    return found


def unlabelled(ds: Any, column: str) -> bool:
    """Whether ``column`` of the split ``ds`` is a ``ClassLabel`` that is -1 in every row."""
    import datasets

    feature = ds.features.get(column)
    return isinstance(feature, datasets.ClassLabel) and len(ds) > 0 and max(ds[column]) < 0
