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


def build_algorithms(cfg: TrainConfig) -> list[Algorithm]:
    """Instantiate the Composer algorithms named in ``cfg.algorithms`` (imports Composer)."""
    import composer.algorithms as ca

    from effsearch.trainer.composer import compat as composer_compat

    composer_compat.apply()
    out = []
    for name, params in cfg.algorithms.items():
        spec = ALGORITHMS[name]
        kwargs = {**spec.params, **(params or {}), **spec.fixed}
        out.append(getattr(ca, spec.composer_name)(**kwargs))
    return out
