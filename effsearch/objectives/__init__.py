"""What a study optimises, computed from a RunResult (pure functions, no training).

``time_to_accuracy`` is the headline: train seconds until validation accuracy
first reaches the target. A run that never reaches it gets a finite penalty
(Optuna needs a number for every finished trial) that is larger than any time a
run that did reach it can have, so a miss can never beat a hit; among misses the
one that came closer ranks better, which still teaches the sampler something.
Test accuracy is recorded on every trial but is deliberately not an objective:
selecting on it would leak the test set into the search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from effsearch.config import ConfigError

# Train seconds a miss is worth at least: ~11.6 days of pure training, far beyond
# any trial a study runs, so every hit (t < MISS_PENALTY_SECONDS) beats every miss.
MISS_PENALTY_SECONDS = 1e6


def miss_penalty(best_val_accuracy: float) -> float:
    """The time-to-accuracy value of a run that never reached its target.

    ``MISS_PENALTY_SECONDS * (2 - best)``: in [1e6, 2e6] seconds, lower for runs
    whose best validation accuracy came closer.
    """
    best = min(max(float(best_val_accuracy), 0.0), 1.0) if best_val_accuracy == best_val_accuracy else 0.0
    return MISS_PENALTY_SECONDS * (2.0 - best)


def _best_val(result) -> float:
    accs = [p.get("val_accuracy") for p in result.history]
    accs = [a for a in accs if a is not None and a == a]
    return max(accs, default=0.0)


def time_to_accuracy(result) -> float:
    if result.time_to_target is not None:
        return float(result.time_to_target)
    return miss_penalty(_best_val(result))


def final_accuracy(result) -> float:
    return float(result.final["val_accuracy"])


def train_time(result) -> float:
    return float(result.final["train_seconds"])


def model_size(result) -> float:
    return float(result.final["nonzero_param_bytes"])


def quantized_size(result) -> float:
    """Bytes of the int8 model's saved state dict, gzip-compressed (``quantize: int8``)."""
    if "quantized_bytes" not in result.final:
        raise ValueError("quantized_size needs quantize: int8 in the trial's config (no quantized_bytes in its result)")
    return float(result.final["quantized_bytes"])


@dataclass(frozen=True)
class Objective:
    name: str
    direction: str  # "minimize" | "maximize" (Optuna's words)
    unit: str
    value: Callable
    help: str


OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("time_to_accuracy", "minimize", "s", time_to_accuracy,
              "train seconds until validation accuracy first reaches the target "
              f"(a miss scores {MISS_PENALTY_SECONDS:.0e} * (2 - best val accuracy))"),
    Objective("final_accuracy", "maximize", "", final_accuracy, "validation accuracy at the end"),
    Objective("train_time", "minimize", "s", train_time, "train seconds of the whole budget"),
    Objective("model_size", "minimize", "B", model_size, "bytes of nonzero parameters (after sparsity)"),
    Objective("quantized_size", "minimize", "B", quantized_size,
              "bytes of the int8-quantized model file, gzip-compressed (needs quantize: int8)"),
)}
# Objectives that need a field of the trial's config to hold: name -> (field, value).
NEEDS = {"quantized_size": ("quantize", "int8")}

DEFAULT = ("time_to_accuracy", "final_accuracy")
NEVER = {"test_accuracy": "test accuracy is recorded on every trial but never optimised (that would "
                          "select on the test set); use final_accuracy (validation)"}


def check(names, field: str = "objectives", source: str | None = None) -> tuple[str, ...]:
    """Validate a list of objective names; returns them as a tuple."""
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, (list, tuple)) or not names:
        raise ConfigError(field, f"must be a non-empty list of: {', '.join(OBJECTIVES)}", source)
    for i, name in enumerate(names):
        if name in NEVER:
            raise ConfigError(f"{field}[{i}]", NEVER[name], source)
        if name not in OBJECTIVES:
            raise ConfigError(f"{field}[{i}]", f"unknown objective {name!r}; allowed: {', '.join(OBJECTIVES)}",
                              source)
    if len(set(names)) != len(names):
        raise ConfigError(field, f"names an objective twice: {list(names)}", source)
    return tuple(names)


def directions(names) -> list[str]:
    return [OBJECTIVES[n].direction for n in names]


def values(result, names) -> list[float]:
    """The objective values of a finished run, in the order of ``names``."""
    return [OBJECTIVES[n].value(result) for n in names]
