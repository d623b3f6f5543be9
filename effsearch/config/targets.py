"""A target relative to the baseline: ``target_accuracy: {relative_to_baseline: -0.01}`` in a study
file's base, resolved from the baseline trial's final validation accuracy before any other trial.

Why: a fixed target a few points under the baseline's accuracy (0.85 against 0.8945 on
Fashion-MNIST) rewards configurations that race to it and stop improving, which the pick within a
point of the baseline then discards (docs/results.md). Timed to the baseline's final accuracy less
a point, a trial's time to target *is* the pick's question, and the study's front holds
configurations within the point.

A training config on its own (``effsearch train``, a config file) has no baseline to resolve
against: there the mapping is refused (``refuse``). ``resolve`` is the one place the number is
made, from the baseline's final value and the offset, so that a target on another metric or in
the other direction extends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from effsearch.config.fields import ConfigError, quote, spec
from effsearch.config.options import check_options

KEY = "relative_to_baseline"
# What a base with a relative target trains until the target is resolved: the baseline (trial 0)
# never crosses it, and its time to the resolved target is read off its curve afterwards.
UNRESOLVED = 1.0


@dataclass(frozen=True)
class RelativeTarget:
    relative_to_baseline: float = spec(
        -0.01,
        low=-1.0,
        high=0.0,
        help="the target, as the baseline trial's final validation accuracy plus this (-0.01: within "
        "a point of it); resolved before any other trial",
    )


def read(value: Any, where: str) -> float | RelativeTarget:
    """A target as given: a number, or ``{relative_to_baseline: OFFSET}`` checked (ConfigError naming ``where``)."""
    if isinstance(value, dict):
        return RelativeTarget(**check_options(RelativeTarget, value, where))
    return value


def is_relative(value: Any) -> bool:
    return isinstance(value, dict) and KEY in value


def resolve(baseline_value: float, offset: float) -> float:
    """The target: the baseline's final value plus ``offset``, kept within [0, 1] (an accuracy)."""
    return min(1.0, max(0.0, float(baseline_value) + float(offset)))


def refuse(value: Any, where: str = "target_accuracy") -> None:
    """A relative target where no baseline resolves it (a training config on its own): ConfigError."""
    if is_relative(value):
        raise ConfigError(
            where,
            f"{quote(value)} is relative to a study's baseline (trial 0), and a training config on its "
            "own has none: give a number (e.g. 0.9), or put the relative target in a study file's base",
        )
