"""Gradual magnitude pruning (Zhu and Gupta, 2017) as a Composer algorithm.

Composer ships none. Every conv/linear weight is pruned layer by layer to the
current sparsity s(t); masks are re-applied after every optimizer step so
momentum cannot regrow pruned weights, and once more at the end (after EMA or
SWA have swapped their averaged weights in).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch
from composer.core import Algorithm, Event

if TYPE_CHECKING:
    from composer.core import State, Time
    from composer.loggers import Logger


def sparsity_at(progress: float, target: float, schedule: str, start: float, end: float) -> float:
    """Target share of zeros at ``progress`` (fraction of training done)."""
    if target <= 0 or progress < start:
        return 0.0
    if schedule == "constant" or progress >= end:
        return target
    frac = (progress - start) / (end - start)
    return target * (1.0 - (1.0 - frac) ** 3)


def prunable(model: torch.nn.Module) -> list[torch.Tensor]:
    return [
        m.weight
        for m in model.modules()
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.weight.requires_grad is not None
    ]


class GradualMagnitudePruning(Algorithm):
    batch_events = ("batch_end",)  # masks re-applied after every step (effsearch's loop fires only these)

    def __init__(
        self, target: float, schedule: str = "polynomial", start: float = 0.1, end: float = 0.75, update_every: int = 20
    ) -> None:
        self.target, self.schedule = target, schedule
        self.start, self.end, self.update_every = start, end, update_every
        self.masks: dict[torch.Tensor, torch.Tensor] = {}
        self.current = 0.0

    def match(self, event: Event, state: State) -> bool:
        return event in (Event.FIT_START, Event.BATCH_END, Event.FIT_END)

    def apply(self, event: Event, state: State, logger: Logger) -> None:
        if event == Event.FIT_START:
            self.masks = {p: torch.ones_like(p, dtype=torch.bool) for p in prunable(state.model)}
            return
        if event == Event.FIT_END:
            self.update(1.0)
        elif int(state.timestamp.batch) % self.update_every == 0:
            self.update(float(cast("Time[float]", state.get_elapsed_duration())))  # the loop sets max_duration
        self.apply_masks()

    def state_dict(self) -> dict[str, Any]:
        """The masks (in ``prunable`` order) and the sparsity reached, for a checkpoint (trainer/checkpoint.py)."""
        return {"masks": list(self.masks.values()), "current": self.current}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A checkpoint's masks, into the ones FIT_START made (the same weights, in the same order)."""
        for mask, saved in zip(self.masks.values(), state["masks"]):
            mask.copy_(saved)
        self.current = state["current"]

    @torch.no_grad()
    def update(self, progress: float) -> None:
        s = sparsity_at(progress, self.target, self.schedule, self.start, self.end)
        if s <= self.current:
            return
        for p, mask in self.masks.items():
            k = int(round(s * p.numel()))
            if k == 0:
                continue
            flat = (p.detach().abs() * mask).flatten()  # pruned weights rank lowest
            idx = torch.topk(flat, k, largest=False).indices
            m = torch.ones_like(flat, dtype=torch.bool)
            m[idx] = False
            mask.copy_(m.view_as(mask))
        self.current = s

    @torch.no_grad()
    def apply_masks(self) -> None:
        for p, mask in self.masks.items():
            p.mul_(mask)


def measure(model: torch.nn.Module) -> dict:
    """Share of zeros among prunable weights; nonzero parameters and their bytes."""
    weights = prunable(model)
    total = sum(p.numel() for p in weights)
    zeros = sum(int((p == 0).sum()) for p in weights)
    params = list(model.parameters())
    nonzero = sum(int((p != 0).sum()) for p in params)
    nbytes = sum(int((p != 0).sum()) * p.element_size() for p in params)
    return {
        "sparsity": zeros / total if total else 0.0,
        "nonzero_params": nonzero,
        "nonzero_param_bytes": nbytes,
        "params": sum(p.numel() for p in params),
    }
