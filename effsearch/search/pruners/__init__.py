"""Stopping weak trials: the study pruner a study file's ``pruner:`` names (MO-ASHA or none), and
``SlowStop``, the ``max_slowdown`` limit around any of them."""

__all__ = ["pruner"]
