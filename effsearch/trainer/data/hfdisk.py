"""A dataset saved by ``datasets``' ``save_to_disk``, opened in one place for images and text alike:
the optional extra's refusal, a folder it cannot read and a dataset without a train split each
refused naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from effsearch.config import ConfigError

HF_EXTRA = "needs the optional extra hf (`uv sync --extra hf`, or `pip install 'effsearch[hf]'`)"


def load_splits(root: Path, name: str) -> dict[str, Any]:
    """The splits saved at ``root`` by name (a lone ``Dataset`` is ``train``); ``name`` is what
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
    if "train" not in found:
        raise ConfigError("dataset.path", f"{root} has no train split (it has {', '.join(found)})")
    return found
