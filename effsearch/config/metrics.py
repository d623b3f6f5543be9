"""What a target is measured on: the validation metrics, each with its direction.

``target_accuracy: 0.9`` (the default) is the target ``{metric: val_accuracy, value: 0.9}``; a
config may instead name any metric here (``target: {metric: val_loss, value: 2.0}``). The trainer's
crossing, the objectives, the pruner's rungs, ``max_slowdown``, the picks and every report read a
target through :class:`Target`, so the direction (higher or lower is better) is decided here once.

A leaf beside ``schema``: it imports nothing of effsearch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    name: str  # the EvalPoint and Final field it is read from
    higher: bool  # higher is better
    label: str  # in reports: "val accuracy"
    short: str  # in a progress line: "acc"
    low: float  # a target's value must be above this (``low_closed``: or equal)
    high: float | None = None  # ... and at most this
    low_closed: bool = True
    why: str = ""  # what the bounds mean, for the message refusing a value outside them

    @property
    def direction(self) -> str:
        """Optuna's word for it: ``maximize`` or ``minimize``."""
        return "maximize" if self.higher else "minimize"

    @property
    def sign(self) -> str:
        return ">=" if self.higher else "<="

    def allows(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value >= self.low if self.low_closed else value > self.low
        return above and (self.high is None or value <= self.high)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("val_accuracy", True, "val accuracy", "acc", 0.0, 1.0, why="an accuracy is in [0, 1]"),
        Metric(
            "val_loss",
            False,
            "val loss",
            "loss",
            0.0,
            low_closed=False,
            why="a cross-entropy in nats a token (or an image) is above 0, and no model reaches 0",
        ),
        Metric(
            "val_bpb",
            False,
            "val bits per byte",
            "bpb",
            0.0,
            low_closed=False,
            why="bits per byte of held-out text are above 0 (language models; comparable across tokenizers)",
        ),
    )
}
ACCURACY = "val_accuracy"


@dataclass(frozen=True)
class Target:
    """A target: ``metric`` at ``value``, reached at or past it in the metric's direction."""

    metric: str = ACCURACY
    value: float = 0.9

    @property
    def m(self) -> Metric:
        return METRICS[self.metric]

    def reached(self, value: float | None) -> bool:
        """``value`` (a measurement of the metric) is at or past the target; None or NaN never is."""
        if value is None or not math.isfinite(value):
            return False
        return value >= self.value if self.m.higher else value <= self.value

    def score(self, value: float) -> float:
        """``value`` turned so that higher is better (a loss negated): what a ranking compares."""
        return float(value) if self.m.higher else -float(value)

    def unscore(self, score: float) -> float:
        return float(score) if self.m.higher else -float(score)

    def shortfall(self, value: float | None) -> float:
        """How far ``value`` is from the target in the metric's direction (0 at or past it)."""
        if value is None or not math.isfinite(value):
            return math.inf
        return max(0.0, self.score(self.value) - self.score(value))

    def relative(self, baseline: float, offset: float) -> Target:
        """The target ``offset`` better than ``baseline`` (the baseline's final value) in the metric's
        direction: -0.01 is a point of accuracy below it, or a loss 0.01 above it. What a target
        relative to the baseline resolves to, on any metric (an accuracy kept in [0, 1])."""
        value = float(baseline) + float(offset) if self.m.higher else float(baseline) - float(offset)
        if self.m.high is not None:
            value = min(self.m.high, max(self.m.low, value))
        return Target(self.metric, value)

    def of(self, point: Any) -> float | None:
        """The metric's value on an EvalPoint or Final (None: not measured)."""
        v = getattr(point, self.metric, None)
        return float(v) if v is not None else None

    def said(self) -> str:
        """A header's words: ``val accuracy 0.9`` as before metric targets, else ``text()``."""
        return f"val accuracy {self.value:g}" if self.metric == ACCURACY else self.text()

    def text(self) -> str:
        """``val loss <= 2`` (what a report says the run aims at)."""
        return f"{self.m.label} {self.m.sign} {self.value:g}"


def target_of(cfg: Any) -> Target:
    """A TrainFields' target: ``target`` where it gives a value, else ``target_accuracy``."""
    t = getattr(cfg, "target", None)
    if t is not None and t.value is not None:
        return Target(t.metric, float(t.value))
    return Target(ACCURACY, float(cfg.target_accuracy))


def target_of_dict(cfg: dict) -> Target:
    """The same, on a raw config dict (a trial's stored config; older ones have no ``target``)."""
    t = cfg.get("target") or {}
    if t.get("value") is not None:
        return Target(t.get("metric") or ACCURACY, float(t["value"]))
    return Target(ACCURACY, float(cfg.get("target_accuracy", 0.9)))


def check_metric(name: str) -> str | None:
    """Why ``name`` is no metric (None: it is one)."""
    if name in METRICS:
        return None
    return f"unknown metric {name!r}; a target is on one of: {', '.join(METRICS)}"
