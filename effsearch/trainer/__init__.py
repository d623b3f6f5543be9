"""One training run of one TrainConfig: ``training.train`` sets it up, ``loop`` runs its steps, and
``result`` is what it leaves (``RunResult``).

Inside: ``data`` (built-in and user datasets, caches, FFCV, CORDS selection), ``parallel``
(data-parallel processes and gradient compression), ``composer`` (Composer's model wrapper,
events, patches and algorithm objects), ``techniques`` (K-FAC, sparsity, int8 quantization, lr
schedules); ``models`` and ``probe`` build a model and read what it is made of.
"""

__all__ = ["composer", "data", "loop", "models", "parallel", "probe", "result", "techniques", "training"]
