"""The methods the replay compares: a sampler, a rung rule, a tuning phase, a warm start.

``methods()`` is the default run's list (what ``compute_ratio=`` is read from; it fits about 15
minutes on 2 idle cores); ``--all`` and ``--only`` choose from every method, ``--gp`` adds
GPSampler's, ``--quick`` keeps a few. A name reads sampler+rule[+tuning][+baseline][/variant];
``rows:`` methods replay the recorded rows themselves (random order, real curves, no surrogate).
"""

from __future__ import annotations

from research.replay.candidates import LossThenPred, MultiMetricRule, TimeRule
from research.replay.rules import OracleRule, Rule
from research.replay.world import Method

# The product's default rule (pruner: {name: moasha}): one budget rung at a ninth, keeping the best
# ninth, ranked on (predicted time to target, accuracy); the searches start with the baseline.
PRODUCT = "tpe+moasha-pred@1/9-eta9+baseline"

TPE_VARIANTS = [
    ("gamma-sqrt", {"gamma": "sqrt"}),
    ("gamma-cap10", {"gamma": "cap10"}),
    ("ei64", {"n_ei_candidates": 64}),
    # one density per parameter (Optuna's default) instead of the product's joint one
    ("independent", {"multivariate": False}),
]


def _samplers() -> list[Method]:
    return [
        Method("random", "random", full_fidelity=True),
        Method("qmc", "qmc", full_fidelity=True),
        Method("tpe", "tpe", full_fidelity=True),
        Method("nsga2", "nsga2", full_fidelity=True),
        # The product trains the study's base config first (its baseline trial): full-fidelity
        # samplers with that warm start too, so that comparing pruning is not comparing warm starts.
        Method("random+baseline", "random", full_fidelity=True, warm=True),
        Method("tpe+baseline", "tpe", full_fidelity=True, warm=True),
    ]


def _budget_rules() -> list[Method]:
    R = Rule
    return [
        Method("random+moasha@1/9", "random", R("product")),
        Method("random+moasha-pred@1/9", "random", R("pred")),
        Method("random+asha-acc@1/3", "random", R("acc", 1 / 3)),
        Method("random+hyperband@1/9", "random", R("hb")),
        # Random proposals under the default rule and the loss rung: the same as rows:random's below
        # but answered by the surrogate (how far the surrogate moves a verdict).
        Method("random+moasha-pred@1/9-eta9", "random", R("pred", eta=9)),
        Method("random+asha-loss@1/27-eta27", "random", R("loss", 1 / 27, eta=27)),
        Method("tpe+moasha@1/9", "tpe", R("product")),
        Method("tpe+moasha-pred@1/9", "tpe", R("pred")),
        Method("tpe+moasha-pred@1/3", "tpe", R("pred", 1 / 3)),
        Method("tpe+asha-acc@1/3", "tpe", R("acc", 1 / 3)),
        Method("tpe+moasha@1/9+baseline", "tpe", R("product"), warm=True),
        Method("tpe+moasha-pred@1/9+baseline", "tpe", R("pred"), warm=True),
        Method("tpe+moasha-pred@1/3+baseline", "tpe", R("pred", 1 / 3), warm=True),
        # One rung at 1/9 keeping the best ninth (eta 9, the product's default),
        # and rungs at 1/9 + 4/9 (eta 4) and 1/9 + 2/3 (eta 6): no cut at 1/3 among the survivors.
        Method("tpe+moasha-pred@1/9-eta9+baseline", "tpe", R("pred", eta=9), warm=True),
        Method(
            "tpe+moasha-pred@1/9-eta9+baseline/pruned-predicted",
            "tpe",
            R("pred", eta=9),
            warm=True,
            pruned_signal="predicted",
        ),
        # The default without keeping a rung's fastest to the target (MOASHAPruner.keep_fastest)
        Method(
            "tpe+moasha-pred@1/9-eta9+baseline/no-keep-fastest", "tpe", R("pred", eta=9, keep_fastest=False), warm=True
        ),
        Method("tpe+moasha-pred@1/9-eta6+baseline", "tpe", R("pred", eta=6), warm=True),
        Method("tpe+moasha-pred@1/9-eta4+baseline", "tpe", R("pred", eta=4), warm=True),
        # studies/fashion-mnist.yaml's rule: one rung at 0.2 of the epochs (on the grid: 2/9), eta 9.
        Method("tpe+moasha-pred@2/9-eta9+baseline", "tpe", R("pred", 2 / 9, eta=9), warm=True),
        # A first rung at 1/27 (rungs 1/27, 1/9, 1/3): the points before the ninths (EARLY_TABLE).
        Method("tpe+moasha-pred@1/27+baseline", "tpe", R("pred", 1 / 27), warm=True),
        # Ranked on val loss where accuracy is still near chance (LOSS_TABLE): one rung at 1/9, 2/27
        # or 1/27 (the losses stop at the first ninth, so no second rung).
        Method("tpe+asha-loss@1/9-eta9+baseline", "tpe", R("loss", eta=9), warm=True),
        Method("tpe+asha-loss@1/27-eta27+baseline", "tpe", R("loss", 1 / 27, eta=27), warm=True),
        Method("tpe+asha-loss@2/27-eta13.5+baseline", "tpe", R("loss", 2 / 27, eta=13.5), warm=True),
    ]


def _candidates() -> list[Method]:
    R = Rule
    return [
        # OptunaHub's multi_metric_pruner (joint mode), as a user would set it up (MedianPruner at
        # every evaluation on seconds so far and accuracy), and closest to effsearch's default (one
        # look at 1/9 keeping the best ninth, on predicted time and accuracy).
        Method("tpe+mmp-median-spent+baseline", "tpe", MultiMetricRule("median", "spent"), warm=True),
        Method("tpe+mmp-median-pred+baseline", "tpe", MultiMetricRule("median", "pred"), warm=True),
        Method(
            "tpe+mmp-percentile11.1-pred@1/9+baseline",
            "tpe",
            MultiMetricRule("percentile", "pred", steps=[1 / 9], percentile=100 / 9),
            warm=True,
        ),
        Method("rows:random+mmp-median-spent", "rows", MultiMetricRule("median", "spent")),
        Method(
            "rows:random+mmp-percentile11.1-pred@1/9",
            "rows",
            MultiMetricRule("percentile", "pred", steps=[1 / 9], percentile=100 / 9),
        ),
        # A cheap first look on val loss at 1/27, then the default's rung.
        *[
            Method(
                f"{prefix}{LossThenPred(a, b).name}{'+baseline' if warm else ''}",
                sampler,
                LossThenPred(a, b),
                warm=warm,
            )
            for prefix, sampler, warm in (("tpe+", "tpe", True), ("rows:random+", "rows", False))
            for a, b in ((3, 3), (2, 4.5), (3, 9))
        ],
        # A rule that knows every outcome (OracleRule): what a rule that never errs would save.
        Method("tpe+oracle@1/9+baseline", "tpe", OracleRule(), warm=True),
        Method("tpe+oracle@1/27+baseline", "tpe", OracleRule(1 / 27), warm=True),
        # One rung at equal train seconds, a share of the baseline's time to target (the product's
        # clock: time, at 0.15; its default for a day), and the shares and ranking tried beside it.
        *[
            Method(f"tpe+{r.name}+baseline", "tpe", r, warm=True)
            for r in (TimeRule(0.15), TimeRule(0.08), TimeRule(0.11), TimeRule(0.2), TimeRule(0.11, kind="pred"))
        ],
        # TPE variants (its good/bad split, its candidates), at full fidelity and under the default rule.
        *[Method(f"tpe+baseline/{tag}", "tpe", full_fidelity=True, warm=True, tpe=o) for tag, o in TPE_VARIANTS],
        *[
            Method(f"tpe+moasha-pred@1/9-eta9+baseline/{tag}", "tpe", R("pred", eta=9), warm=True, tpe=o)
            for tag, o in TPE_VARIANTS
        ],
        # Before misses and pruned trials told TPE their shortfall (constraints):
        Method("tpe+baseline/no-constraints", "tpe", full_fidelity=True, warm=True, constraints="none"),
        Method("tpe+moasha-pred@1/9+baseline/no-constraints", "tpe", R("pred"), warm=True, constraints="none"),
        Method("tpe+moasha-pred@1/9+baseline/misses-only", "tpe", R("pred"), warm=True, constraints="misses"),
        # The tuning phase: phase 1 on a data subset, phase 2 confirms on the full data.
        Method("effsearch-default", "tpe", R("product"), tune="tune20", confirm="end"),
        Method(
            "tpe+moasha-pred@1/9+tune50,rolling+baseline", "tpe", R("pred"), tune="tune50", confirm="rolling", warm=True
        ),
        Method("tpe+tune50,rolling+baseline", "tpe", None, tune="tune50", confirm="rolling", warm=True),
    ]


def _rows() -> list[Method]:
    R = Rule
    return [
        # Cross-check on the recorded rows themselves (random order, real curves, no surrogate).
        Method("rows:random", "rows"),
        Method("rows:random+moasha@1/9", "rows", R("product")),
        Method("rows:random+moasha-pred@1/9", "rows", R("pred")),
        Method("rows:random+moasha-pred@1/27", "rows", R("pred", 1 / 27)),
        Method("rows:random+moasha-pred@1/9-eta9", "rows", R("pred", eta=9)),
        Method("rows:random+moasha-pred@2/9-eta9", "rows", R("pred", 2 / 9, eta=9)),
        Method("rows:random+asha-loss@1/9-eta9", "rows", R("loss", eta=9)),
        Method("rows:random+asha-loss@1/27-eta27", "rows", R("loss", 1 / 27, eta=27)),
        Method("rows:random+moasha-pred@1/27-eta27", "rows", R("pred", 1 / 27, eta=27)),
        Method("rows:random+asha-acc@1/3", "rows", R("acc", 1 / 3)),
    ]


# Left out of the default run, which must fit 15 minutes on 2 cores: the rank-spent TPE variants
# cost 22-47 CPU-s a search (TPE with 400-600 trials), and they lost (docs/benchmarks.md); so did
# TPE + pruner without the baseline, random + moasha-pred, accuracy-only ASHA and the tuning phase
# on 50%.
LEFT_OUT = {
    "qmc",
    "tpe+moasha-pred@1/9-eta9+baseline/no-keep-fastest",  # the same figures as the default's (2026-11-27)
    "random+asha-acc@1/3",
    "random+hyperband@1/9",
    "tpe+moasha@1/9",
    "tpe+moasha-pred@1/3",
    "tpe+moasha-pred@1/9",
    "random+moasha-pred@1/9",
    "tpe+asha-acc@1/3",
    "tpe+tune50,rolling+baseline",
    # a rung at 1/27 stops 96% of trials, so TPE models 600+ of them a search (50-80 CPU-s
    # of its own): 13 min for these two on 10 seeds (docs/benchmarks.md)
    "tpe+moasha-pred@1/27+baseline",
    "tpe+oracle@1/27+baseline",
    "tpe+moasha@1/9+baseline",
    "effsearch-default",
    "tpe+moasha-pred@1/9+tune50,rolling+baseline",
    "tpe+baseline/no-constraints",
    "tpe+moasha-pred@1/9+baseline/no-constraints",
    "tpe+moasha-pred@1/9+baseline/misses-only",
    # beside the default (one rung at 1/9, eta 9): a second rung at 1/3, 4/9, 2/3
    "tpe+moasha-pred@1/3+baseline",
    "tpe+moasha-pred@1/9-eta6+baseline",
    "tpe+moasha-pred@1/9-eta4+baseline",
    "tpe+moasha-pred@2/9-eta9+baseline",
    # the eta-3 rule, an earlier default (231 CPU-s over 40 seeds)
    "tpe+moasha-pred@1/9+baseline",
    # beside the loss rung at 1/27 on the recorded rows
    "rows:random+moasha-pred@1/27-eta27",
    "random+moasha-pred@1/9-eta9",
    # studies/fashion-mnist.yaml's rung (2/9) on the recorded rows
    "rows:random+moasha-pred@2/9-eta9",
    # pruned trials told TPE by predicted speed (no lever)
    "tpe+moasha-pred@1/9-eta9+baseline/pruned-predicted",
}
# Also left out: the time rung (414 CPU-s over 40 seeds: with it the run took 897-1,018 s on a
# slower machine, past the 15 minutes the default run must fit), the rungs ranked on val loss
# (they lost under TPE; TPE at 1/27 models 650+ trials a search), OptunaHub's multi_metric_pruner
# and a loss look before the default's rung (both lost), and the TPE variants.
LEFT_OUT_RULES = (TimeRule, MultiMetricRule, LossThenPred)

QUICK = {
    "random",
    "tpe",
    "tpe+baseline",
    "random+moasha@1/9",
    "random+moasha-pred@1/9",
    "effsearch-default",
    "tpe+moasha-pred@1/9+baseline",
    "tpe+moasha-pred@1/9-eta9+baseline",
    "tpe+oracle@1/9+baseline",
    "tpe+moasha-time@0.15+baseline",
    "rows:random",
    "rows:random+moasha-pred@1/9",
    "rows:random+moasha-pred@1/9-eta9",
}


def _gp() -> list[Method]:
    """GPSampler's (minutes a search on 2 cores: measured on its own, ``--gp``)."""
    R = Rule
    return [
        Method("gp", "gp", full_fidelity=True),
        Method("gp+moasha-pred@1/9", "gp", R("pred")),
        # beside the yardstick and the default, with the baseline first as they have it
        Method("gp+baseline", "gp", full_fidelity=True, warm=True),
        Method("gp+moasha-pred@1/9-eta9+baseline", "gp", R("pred", eta=9), warm=True),
    ]


def methods(quick: bool, gp: bool = False, full: bool = False) -> list[Method]:
    """The default run's methods; ``full``: every method; ``gp``: GPSampler's too; ``quick``: a few."""
    ms = _samplers() + _budget_rules() + _candidates() + _rows()
    if not full:
        ms = [
            m
            for m in ms
            if m.name not in LEFT_OUT
            and m.tpe is None
            and not isinstance(m.rule, LEFT_OUT_RULES)
            and not (m.rule and m.rule.reads_loss)
        ]
    if gp:
        ms += _gp()
    if quick:
        ms = [m for m in ms if m.name in QUICK]
    return ms
