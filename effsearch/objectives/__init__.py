"""What a study optimises, computed from a RunResult (pure functions, no training).

``time_to_accuracy`` is the headline: train seconds until validation accuracy
first reaches the target, earned only if the delivered (final) model reaches it.
A run that misses has no time to target. Optuna still needs a number for every
finished trial, so a miss stores the train seconds it ran (a lower bound of its
time to target: a real time, never a huge penalty that squashes every plot) and
is marked infeasible with Optuna's own constraint (``miss_constraint``: how far
the final validation accuracy fell short of the target). A pruned trial carries
the same constraint, from the accuracy it was stopped at. TPE reads the stored
constraints whatever it was built with: it learns from every feasible trial
first, then from infeasible and pruned ones by that shortfall, so a near miss
still carries signal (without it, pruned trials, which have no values in a
multi-objective study, would rank ahead of every miss). ``study.best_trials``
and optuna-dashboard's plots leave misses off the front (drawn grey as
"infeasible"). Test accuracy is recorded on every trial but
is deliberately not an objective: selecting on it would leak the test set into
the search.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from effsearch.config import ConfigError
from effsearch.config.metrics import ACCURACY

if TYPE_CHECKING:
    from effsearch.trainer.result import RunResult

__all__ = [
    "DEFAULT",
    "FINAL_METRIC",
    "TIME_OBJECTIVES",
    "NEEDS",
    "OBJECTIVES",
    "Objective",
    "check",
    "constraints",
    "directions",
    "final_accuracy",
    "final_metric",
    "metric_of",
    "miss_constraint",
    "model_size",
    "quantized_size",
    "shortfall",
    "time_to_accuracy",
    "train_time",
    "values",
]


def time_to_accuracy(result: RunResult) -> float:
    """Train seconds to the target; for a miss, the train seconds it ran (marked infeasible)."""
    if result.time_to_target is not None:
        return float(result.time_to_target)
    return float(result.final.train_seconds or 0.0)


def miss_constraint(result: RunResult) -> float:
    """Optuna's constraint value (feasible when <= 0): 0 for a run whose delivered model reached
    the target, else how far its final value of the target's metric fell short (at least 1e-6;
    an accuracy never measured counts as 0, a loss never measured as 1e6 short)."""
    target = result.target
    final = target.of(result.final)
    if target.metric == ACCURACY:
        acc = final if final is not None and math.isfinite(final) else 0.0
        return shortfall(acc, result.time_to_target is not None, result.target_accuracy)
    if result.time_to_target is not None:
        return 0.0
    return max(min(target.shortfall(final), 1e6), 1e-6)


def shortfall(accuracy: float, hit: bool, target: float) -> float:
    """The constraint rule on plain numbers (the replay benchmark applies it too): 0 for a hit,
    else how far ``accuracy`` fell short of ``target`` (at least 1e-6, so a miss is infeasible)."""
    return 0.0 if hit else max(float(target) - float(accuracy), 1e-6)


def final_accuracy(result: RunResult) -> float:
    return float(_required(result, "val_accuracy"))


def final_metric(name: str) -> Callable[[RunResult], float]:
    """The delivered model's value of the metric ``name`` (a KeyError where it was not measured)."""

    def value(result: RunResult) -> float:
        return float(_required(result, name))

    return value


def train_time(result: RunResult) -> float:
    return float(_required(result, "train_seconds"))


def model_size(result: RunResult) -> float:
    return float(_required(result, "nonzero_param_bytes"))


def quantized_size(result: RunResult) -> float:
    """Bytes of the int8 model's saved state dict, gzip-compressed (``quantize: int8``)."""
    if result.final.quantized_bytes is None:
        raise ValueError("quantized_size needs quantize: int8 in the trial's config (no quantized_bytes in its result)")
    return float(result.final.quantized_bytes)


def _required(result: RunResult, name: str) -> Any:
    """A measurement a completed run always has (a KeyError, as before the types, if not)."""
    value = getattr(result.final, name)
    if value is None:
        raise KeyError(name)
    return value


@dataclass(frozen=True)
class Objective:
    name: str
    direction: str  # "minimize" | "maximize" (Optuna's words)
    unit: str
    value: Callable[[RunResult], float]
    help: str


OBJECTIVES: dict[str, Objective] = {
    o.name: o
    for o in (
        Objective(
            "time_to_accuracy",
            "minimize",
            "s",
            time_to_accuracy,
            "train seconds until validation accuracy first reaches the target, if the final model "
            "reaches it (a miss stores its train seconds and is infeasible: never on the front)",
        ),
        Objective("final_accuracy", "maximize", "", final_accuracy, "validation accuracy at the end"),
        Objective("train_time", "minimize", "s", train_time, "train seconds of the whole budget"),
        Objective("model_size", "minimize", "B", model_size, "bytes of nonzero parameters (after sparsity)"),
        Objective(
            "quantized_size",
            "minimize",
            "B",
            quantized_size,
            "bytes of the int8-quantized model file, gzip-compressed (needs quantize: int8)",
        ),
        Objective(
            "time_to_target",
            "minimize",
            "s",
            time_to_accuracy,
            "train seconds until the target's metric (target.metric: val_loss, val_bpb or val_accuracy) "
            "first reaches target.value, if the final model reaches it (a miss is infeasible, as for "
            "time_to_accuracy)",
        ),
        Objective(
            "final_val_loss", "minimize", "", final_metric("val_loss"), "validation loss at the end (lower is better)"
        ),
        Objective(
            "final_val_bpb",
            "minimize",
            "",
            final_metric("val_bpb"),
            "bits per byte of the held-out text at the end (language models; comparable across tokenizers)",
        ),
    )
}
# Objectives that need a field of the trial's config to hold: name -> (field, value).
NEEDS = {"quantized_size": ("quantize", "int8")}

DEFAULT = ("time_to_accuracy", "final_accuracy")
# The objectives that time a run to its target (a miss is infeasible), and the final-value ones by metric.
TIME_OBJECTIVES = ("time_to_accuracy", "time_to_target")
FINAL_METRIC = {"final_accuracy": ACCURACY, "final_val_loss": "val_loss", "final_val_bpb": "val_bpb"}
NEVER = {
    "test_accuracy": "test accuracy is recorded on every trial but never optimised (that would "
    "select on the test set); use final_accuracy (validation)"
}


def check(names: object, field: str = "objectives", source: str | None = None) -> tuple[str, ...]:
    """Validate a list of objective names; returns them as a tuple."""
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, (list, tuple)) or not names:
        raise ConfigError(field, f"must be a non-empty list of: {', '.join(OBJECTIVES)}", source)
    for i, name in enumerate(names):
        if name in NEVER:
            raise ConfigError(f"{field}[{i}]", NEVER[name], source)
        if name not in OBJECTIVES:
            raise ConfigError(f"{field}[{i}]", f"unknown objective {name!r}; allowed: {', '.join(OBJECTIVES)}", source)
    if len(set(names)) != len(names):
        raise ConfigError(field, f"names an objective twice: {list(names)}", source)
    return tuple(names)


def directions(names: Sequence[str]) -> list[str]:
    return [OBJECTIVES[n].direction for n in names]


def values(result: RunResult, names: Sequence[str]) -> list[float]:
    """The objective values of a finished run, in the order of ``names``."""
    return [OBJECTIVES[n].value(result) for n in names]


def constraints(result: RunResult, names: Sequence[str]) -> list[float]:
    """Optuna constraint values (feasible when all <= 0): a miss is infeasible when time to
    target is an objective; none otherwise."""
    return [miss_constraint(result)] if any(n in TIME_OBJECTIVES for n in names) else []


def metric_of(names: Sequence[str], target_metric: str = ACCURACY) -> str:
    """The metric a study's reports read the final quality on: its final-value objective's, else
    the target's."""
    return next((FINAL_METRIC[n] for n in names if n in FINAL_METRIC), target_metric)
