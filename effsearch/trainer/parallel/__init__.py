"""Data-parallel training: ``distributed`` (processes, the process group, DDP) and ``compression``
(gradient compression as DDP communication hooks)."""

__all__ = ["compression", "distributed"]
