"""What the yardstick compares: a sampler, a target and warm starts, on the same space and pruner.

Peers are Optuna's samplers with Optuna's own defaults (what a user who picks one gets):
``TPESampler()`` is ``tpe`` with one density per parameter, no grouping, no constant liar and
10 start-up trials; ``NSGAIISampler()`` a population of 50; ``GPSampler()`` 10 start-up trials.
``tpe`` is effsearch's TPE (joint, grouped, 5 start-up trials: docs/benchmarks.md), ``local``
effsearch's local sampler (``effsearch/search/study/local.py``). OptunaHub's ``AutoSampler``
is not among them: OptunaHub loads a sampler's code from GitHub when it is asked for it
(``optunahub.load_module``), which a machine without a network cannot (research/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

OPTUNA_TPE = {"name": "tpe", "multivariate": False, "group": False, "constant_liar": False, "n_startup_trials": 10}


@dataclass(frozen=True)
class Variant:
    name: str
    sampler: dict  # a study file's sampler mapping
    target: str = "relative"  # relative: the baseline's final less a point; study: the study file's target
    warm: tuple = ("recipes",)  # warm_start entries (recipes: every recipe)
    pruner: dict = field(default_factory=lambda: {"name": "moasha"})


def _peers(target: str, tag: str) -> list[Variant]:
    return [
        Variant(f"random{tag}", {"name": "random"}, target),
        Variant(f"tpe-optuna{tag}", OPTUNA_TPE, target),
        Variant(f"tpe{tag}", {"name": "tpe"}, target),
        Variant(f"nsga2{tag}", {"name": "nsga2"}, target),
        Variant(f"gp{tag}", {"name": "gp"}, target),
        Variant(f"local{tag}", {"name": "local"}, target),
    ]


def variants() -> list[Variant]:
    """Every variant: the peers at the relative target and at the study's, and the levers one at a time."""
    return [
        *_peers("relative", ""),
        *_peers("study", "@study-target"),
        Variant("local/no-recipes", {"name": "local"}, warm=()),
        Variant("tpe/no-recipes", {"name": "tpe"}, warm=()),
        Variant("local/changes-2", {"name": "local", "changes": 2.0}),
        Variant("local/tournament-2", {"name": "local", "tournament": 2}),
        Variant("local/tournament-5", {"name": "local", "tournament": 5}),
        Variant("local/no-pruner", {"name": "local"}, pruner={"name": "none"}),
        Variant("tpe/no-pruner", {"name": "tpe"}, pruner={"name": "none"}),
    ]


DEFAULT = ("random", "tpe-optuna", "tpe", "nsga2", "local", "tpe@study-target", "local@study-target")


def chosen(only: str) -> list[Variant]:
    """The variants ``--only`` names (comma-separated; empty: ``DEFAULT``); an unknown name raises KeyError."""
    by = {v.name: v for v in variants()}
    names = [n for n in only.split(",") if n] if only else list(DEFAULT)
    missing = [n for n in names if n not in by]
    if missing:
        raise KeyError(f"no variant named {', '.join(missing)}; variants: {', '.join(by)}")
    return [by[n] for n in names]
