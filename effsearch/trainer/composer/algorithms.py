"""Composer's algorithm objects for ``cfg.algorithms`` (imports Composer, ~18 s on 2 cores).

The table of names, parameters and per-batch events is ``effsearch.config.algorithms``
(no Composer import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from effsearch.config.algorithms import ALGORITHMS

if TYPE_CHECKING:
    from composer.core import Algorithm

    from effsearch.config import TrainConfig


def build_algorithms(cfg: TrainConfig, text: bool = False) -> list[Algorithm]:
    """Instantiate the Composer algorithms named in ``cfg.algorithms`` (imports Composer); ``text``:
    a token-id model's, effsearch's versions where Composer's need its own model wrapper."""
    import composer.algorithms as ca
    from composer.core import Event

    from effsearch.trainer.composer import compat as composer_compat

    composer_compat.apply()
    out = []
    for name, params in cfg.algorithms.items():
        spec = ALGORITHMS[name]
        kwargs = {**spec.params, **(params or {}), **spec.fixed}
        if name == "low_precision_layernorm":
            kwargs["apply_at"] = Event(kwargs["apply_at"])  # the table holds no Composer import
        if name == "seq_length_warmup":
            kwargs["max_seq_length"] = cfg.dataset.max_length
        cls = getattr(ca, spec.composer_name)
        if text or name in ("gated_linear_units", "seq_length_warmup"):
            from effsearch.trainer.composer.textalgorithms import TEXT_VERSIONS

            cls = TEXT_VERSIONS.get(name, cls)
        out.append(cls(**kwargs))
    return out
