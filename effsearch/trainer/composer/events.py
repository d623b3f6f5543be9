"""Composer's events and devices as effsearch's loop uses them: the per-batch events in
Composer's order, which of them an algorithm acts on (the loop fires only those), and
Composer's ``Device`` for effsearch's device name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from composer.core import Event

if TYPE_CHECKING:
    from composer.core import Algorithm
    from composer.devices import Device

# Composer's per-batch events, in its order. Each ``run_event`` walks every algorithm's
# ``match`` (~10 us); twelve of them a step would cost as much as a small GPU step, so
# only the events some algorithm of the run listens to are fired (see ``listens``).
BATCH_EVENTS = (
    Event.AFTER_DATALOADER,
    Event.BATCH_START,
    Event.BEFORE_TRAIN_BATCH,
    Event.BEFORE_FORWARD,
    Event.AFTER_FORWARD,
    Event.BEFORE_LOSS,
    Event.AFTER_LOSS,
    Event.BEFORE_BACKWARD,
    Event.AFTER_BACKWARD,
    Event.AFTER_TRAIN_BATCH,
    Event.BATCH_END,
    Event.BATCH_CHECKPOINT,
)


def listens(algorithm: Algorithm) -> tuple[Event, ...]:
    """The per-batch events ``algorithm`` can act on: its ``batch_events``, else the
    table in ``algorithms.ALGORITHMS`` (checked against each ``match`` by a test), else all."""
    own = getattr(algorithm, "batch_events", None)
    if own is None:
        from effsearch.config.algorithms import BY_COMPOSER_NAME

        spec = BY_COMPOSER_NAME.get(type(algorithm).__name__)
        own = spec.batch_events if spec is not None else BATCH_EVENTS
    return tuple(Event(e) for e in own)


# effsearch's device names -> Composer's (Composer refuses 'cuda': it wants 'gpu').
COMPOSER_DEVICES = {"cpu": "cpu", "cuda": "gpu"}


def composer_device(device: str) -> Device:
    """Composer's Device for effsearch's resolved device name ('cpu' or 'cuda')."""
    from composer.utils import get_device

    return get_device(COMPOSER_DEVICES[device])
