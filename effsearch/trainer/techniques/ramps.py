"""A language model's batch-size ramp and sequence-length warm-up, as a table of shapes.

Both grow a step's batch of windows linearly over the first share of training, the batch from a
quarter of ``batch_size`` and the windows from a quarter of ``dataset.max_length`` (at least 8
tokens, in steps of 8: fewer shapes for a compiled or cuDNN-timed model), as the nanoGPT speedrun
and Composer's SeqLengthWarmup grow them. The steps stay as many as without them, so the early
steps see fewer tokens (the cheaper steps are the point). The table is computed once, before
training (as the lr schedule's factors, ``schedule.py``): a step costs one list index.
"""

from __future__ import annotations

from dataclasses import dataclass

LEAST_LENGTH = 8  # the shortest window the warm-up starts from (Composer's SeqLengthWarmup's step)


def grow(full: int, step: int, steps: int, least: int = 1, multiple: int = 1) -> int:
    """The size at ``step`` of a linear growth from a quarter of ``full`` (at least ``least``) to
    ``full`` over ``steps`` steps, rounded down to a ``multiple`` (``full`` from then on)."""
    start = min(full, max(least, full // 4))
    if step >= steps:
        return full
    size = start + (full - start) * step // steps
    return max(start, size - size % multiple) if multiple > 1 else size


@dataclass(frozen=True)
class Shapes:
    """(windows, tokens a window) for each batch served, the ramped ones first; then the full shape."""

    ramped: list[tuple[int, int]]
    full: tuple[int, int]

    def at(self, served: int) -> tuple[int, int]:
        return self.ramped[served] if served < len(self.ramped) else self.full


def shapes(batch: int, length: int, batch_steps: int, length_steps: int) -> Shapes:
    """The shapes of a run whose batch ramps over ``batch_steps`` batches and whose windows warm up
    over ``length_steps`` (0: that one off)."""
    ramped = [
        (grow(batch, i, batch_steps), grow(length, i, length_steps, LEAST_LENGTH, LEAST_LENGTH))
        for i in range(max(batch_steps, length_steps))
    ]
    return Shapes(ramped, (batch, length))
