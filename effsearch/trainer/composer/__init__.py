"""Composer as effsearch's loop uses it: ``model`` (the ComposerModel wrapper), ``events`` (the
per-batch events and devices), ``compat`` (numbered patches to Composer 0.32.1) and
``algorithms`` (Composer's algorithm objects for ``cfg.algorithms``; importing Composer takes
about 18 s, so nothing here is imported until a run needs it)."""

__all__ = ["algorithms", "compat", "events", "model"]
