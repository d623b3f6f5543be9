"""Training techniques that are not Composer's: ``kfac`` (K-FAC preconditioned SGD), ``sparsity``
(gradual magnitude pruning), ``quantize`` (post-training int8) and ``schedule`` (lr schedules as
per-step factors)."""

__all__ = ["kfac", "quantize", "schedule", "sparsity"]
