"""A target relative to the baseline: ``target_accuracy: {relative_to_baseline: -0.01}`` in a study
file's base, resolved from the baseline trial's final validation accuracy before any other trial;
on any metric, ``target: {metric: val_loss, relative_to_baseline: -0.01}`` (a loss 0.01 above the
baseline's final loss).

Why: a fixed target a few points under the baseline's accuracy (0.85 against 0.8945 on
Fashion-MNIST) rewards configurations that race to it and stop improving, which the pick within a
point of the baseline then discards (docs/results.md). Timed to the baseline's final accuracy less
a point, a trial's time to target *is* the pick's question, and the study's front holds
configurations within the point.

A training config on its own (``effsearch train``, a config file) has no baseline to resolve
against: there the mapping is refused (``refuse``). ``resolve`` is the one place the number is
made, from the baseline's final value and the offset, through ``metrics.Target.relative`` (which
knows the metric's direction and bounds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from effsearch.config.fields import ConfigError, quote, spec
from effsearch.config.metrics import ACCURACY, METRICS, Target, check_metric
from effsearch.config.options import check_options

KEY = "relative_to_baseline"
# What a base with a relative target trains until the target is resolved: the baseline (trial 0)
# never crosses it, and its time to the resolved target is read off its curve afterwards.
UNRESOLVED = 1.0
# The same on a metric where lower is better: a loss above 0 that no model reaches.
UNRESOLVED_LOW = 1e-9


@dataclass(frozen=True)
class RelativeTarget:
    relative_to_baseline: float = spec(
        -0.01,
        low=-1.0,
        high=0.0,
        help="the target, as the baseline trial's final value of the metric this much better (-0.01: a "
        "point of accuracy below it, or a loss 0.01 above it); resolved before any other trial",
    )


def read(value: Any, where: str) -> float | RelativeTarget:
    """A target as given: a number, or ``{relative_to_baseline: OFFSET}`` checked (ConfigError naming ``where``)."""
    if isinstance(value, dict):
        return RelativeTarget(**check_options(RelativeTarget, value, where))
    return value


def read_target(value: dict, where: str) -> tuple[str, float]:
    """A ``target`` mapping relative to the baseline (``{metric: M, relative_to_baseline: OFFSET}``):
    (its metric, its offset), checked (ConfigError naming ``where`` and the field)."""
    metric = value.get("metric", ACCURACY)
    why = check_metric(metric) if isinstance(metric, str) else f"must be a metric's name; got {quote(metric)}"
    if why:
        raise ConfigError(f"{where}.metric", why)
    if value.get("value") is not None:
        raise ConfigError(
            f"{where}.value",
            f"given beside {where}.{KEY}: a target is a number or relative to the baseline; give one or the other",
        )
    rest = {k: v for k, v in value.items() if k not in ("metric", "value")}
    m = METRICS[metric]
    offset = rest.get(KEY)
    if isinstance(offset, (int, float)) and not isinstance(offset, bool) and offset > 0:
        raise ConfigError(
            f"{where}.{KEY}",
            f"{offset:g} asks for a {m.label} better than the baseline's own final one, which the baseline "
            f"may never reach{' (a loss could resolve at or below 0)' if not m.higher else ''}; give 0 or "
            f"less: -0.01 is a {m.label} {'0.01 below' if m.higher else '0.01 above'} the baseline's",
        )
    return metric, check_options(RelativeTarget, rest, where)[KEY]


def is_relative(value: Any) -> bool:
    return isinstance(value, dict) and KEY in value


def unresolved(metric: str) -> float:
    """What a base with a relative target on ``metric`` trains towards until it is resolved."""
    return UNRESOLVED if METRICS[metric].higher else UNRESOLVED_LOW


def resolve(metric: str, baseline_value: float, offset: float) -> float | None:
    """The target: the baseline's final value of ``metric`` made ``offset`` better in its direction
    (``Target.relative``: an accuracy kept within [0, 1]); None where that is no target the metric
    allows (a loss at or below 0)."""
    value = Target(metric).relative(baseline_value, offset).value
    return value if METRICS[metric].allows(value) else None


def refuse(value: Any, where: str = "target_accuracy") -> None:
    """A relative target where no baseline resolves it (a training config on its own): ConfigError."""
    if is_relative(value):
        example = "target.value: 2.0" if where == "target" else "0.9"
        raise ConfigError(
            f"{where}.{KEY}" if where == "target" else where,
            f"{quote(value)} is relative to a study's baseline (trial 0), and a training config on its "
            f"own has none: give a number (e.g. {example}), or put the relative target in a study file's base",
        )
