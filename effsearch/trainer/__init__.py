"""One run of one TrainConfig: data, models, Composer algorithms, sparsity, timing."""

from typing import Any

from effsearch.trainer.result import RunResult, time_to_target

__all__ = ["RunResult", "time_to_target", "train"]


def train(*args: Any, **kwargs: Any) -> RunResult:
    """See :func:`effsearch.trainer.run.train` (imported lazily: torch and Composer are slow to load)."""
    from effsearch.trainer.run import train as _train

    return _train(*args, **kwargs)
