"""RunResult: what one training run leaves behind (``result.json``)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class RunResult:
    status: str  # completed | diverged | interrupted | pruned | failed
    config: dict
    history: list = field(default_factory=list)  # {epoch, samples_seen, train_seconds, val_accuracy, val_loss, ...}
    final: dict = field(default_factory=dict)
    target_accuracy: float = 0.0
    time_to_target: float | None = None
    reason: str = ""
    device: str = "cpu"
    versions: dict = field(default_factory=dict)

    @property
    def reached_target(self) -> bool:
        return self.time_to_target is not None

    def to_dict(self) -> dict:
        return _finite(asdict(self))

    def save(self, path: str | Path) -> Path:
        """Write atomically, so a crash never leaves half a file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".result-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_dict(), f, indent=2)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> RunResult:
        return cls(**json.loads(Path(path).read_text()))


def time_to_target(history: list, target: float, final_accuracy: float | None = None) -> float | None:
    """Train seconds at the first evaluation at or above ``target``.

    With ``final_accuracy`` (the delivered model's validation accuracy), a run whose final
    model misses the target has no time to target: a crossing earlier in training was not
    earned by the model the user gets (sparsity pruned further after it, say).
    """
    if final_accuracy is not None and not final_accuracy >= target:
        return None
    for point in history:
        acc = point.get("val_accuracy")
        if acc is not None and acc >= target:
            return point["train_seconds"]
    return None


def _finite(obj):
    """NaN/inf are not JSON: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("effsearch", "torch", "torchvision", "mosaicml", "cords", "optuna", "ffcv"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    import platform

    out["python"] = platform.python_version()
    return out
