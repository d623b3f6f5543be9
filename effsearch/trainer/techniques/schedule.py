"""Learning-rate schedules as a list of per-step factors, computed once before training.

Composer's schedulers are functions of its ``State`` evaluated every step (Time
arithmetic in Python, ~20 us a step); a table costs one list index. The shapes
are Composer's warm-up schedulers' (a test holds them equal), evaluated on the
step count, so the lr moves every step whatever the run's length.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from effsearch.config import ScheduleConfig


def factor(p: float, s: ScheduleConfig) -> float:
    """The lr at progress ``p`` in [0, 1] as a share of the peak, for ScheduleConfig ``s``."""
    if s.name == "onecycle":  # Smith's one-cycle, as cifar10-fast: ramp from 5% to the peak, then linear decay
        peak = s.warmup_fraction or 0.25
        if p < peak:
            return 0.05 + 0.95 * p / peak
        return 1.0 - (1.0 - s.final_lr_fraction) * (p - peak) / (1.0 - peak)
    w = s.warmup_fraction
    if p < w:  # linear warm-up from 0, as Composer's *WithWarmup schedulers
        return p / w
    if s.name == "constant":
        return 1.0
    if s.name == "multistep":
        return s.gamma ** sum(p >= m for m in s.milestones)
    frac = (p - w) / (1.0 - w) if w < 1.0 else 1.0
    if s.name == "cosine":
        return s.final_lr_fraction + (1.0 - s.final_lr_fraction) * 0.5 * (1.0 + math.cos(math.pi * frac))
    if s.name == "linear":
        return 1.0 + (s.final_lr_fraction - 1.0) * frac
    if s.name == "wsd":  # warm-up, hold at the peak, then a linear cool-down over the last cooldown_fraction
        into = (p - (1.0 - s.cooldown_fraction)) / s.cooldown_fraction
        return 1.0 if into <= 0 else 1.0 + (s.final_lr_fraction - 1.0) * into
    raise ValueError(f"unknown schedule {s.name!r}")


def factors(s: ScheduleConfig, total_steps: int) -> list[float]:
    """One factor per optimizer step (step k uses ``factors[k]``)."""
    n = max(1, total_steps)
    return [factor(k / n, s) for k in range(n)]
