"""Candidate rung rules measured beside the product's and not built (docs/benchmarks.md, search
efficiency): OptunaHub's multi-metric pruner, a val-loss look before the default's rung, and a
rung at equal train seconds (the product's ``clock: time``)."""

from __future__ import annotations

import math

import numpy as np

from research.replay.rules import Rule, frac, grid_index
from research.replay.run import EARLY, N_GRID, Run


class MultiMetricRule(Rule):
    """OptunaHub's ``pruners/multi_metric_pruner`` (joint mode; optunahub-registry ee68019,
    2026-08), the community's multi-objective pruner, modelled for comparison. At every step a
    trial reports (``metrics``), it is ranked by non-dominated sorting among every trial that
    reported that step; a trial on the first front gets -1 (never pruned), one off it its rank plus
    a bonus of -0.5 .. -0.1 by greedy hypervolume contribution among the trials of its rank. Those
    ranks are handed to a single-objective ``base`` pruner as intermediate values: ``median``
    (Optuna's MedianPruner, the package's example) or ``percentile`` (PercentilePruner at
    ``percentile``; 100/9 keeps the best ninth, as effsearch's default). Optuna's pruners compare the
    trial's best value over its steps so far (a trial once on a front is never pruned after) with
    the percentile of the others' values at this step, once ``n_startup`` trials have finished.
    ``metrics``: ``spent`` (train seconds so far, accuracy: what a user would report) or ``pred``
    (the time to target the curve predicts, accuracy: effsearch's ``rank: predicted``).
    ``steps``: the grid positions it is asked at (None: every evaluation before the end). Every
    point it is asked at decides, so each is scored whole."""

    def __init__(
        self, base: str = "median", metrics: str = "spent", steps=None, percentile: float = 50.0, n_startup: int = 5
    ):
        super().__init__("product", 1 / 9)
        self.base, self.metrics, self.n_startup = base, metrics, n_startup
        self.percentile = 50.0 if base == "median" else percentile
        self.steps = list(range(N_GRID - 1)) if steps is None else [grid_index(s) for s in steps]
        self.early = [k for k in self.steps if k < 0]
        where = "" if steps is None else "@" + "+".join(frac(s) for s in steps)
        self.name = f"mmp-{base}{'' if base == 'median' else f'{percentile:.3g}'}-{metrics}{where}"

    def vector(self, run: Run, k: int, target: float) -> tuple[float, float]:
        """The reported metrics as losses (lower is better)."""
        first = self.early[0] if self.early else 0
        t = run.t_at(k) if self.metrics == "spent" else run.extrapolated_ttt(k, target, first)
        return (t, -run.acc_at(k))

    @staticmethod
    def rewards(vals: list, me: int) -> list[float]:
        """The package's values at one step: non-dominated rank, -1 for ``me`` on the first front,
        else a hypervolume-contribution bonus among the points sharing ``me``'s rank."""
        from optuna.study._multi_objective import _fast_non_domination_rank

        lv = np.asarray(vals, dtype=float)
        ranks = _fast_non_domination_rank(lv)
        out = ranks.astype(float)
        if ranks[me] == ranks.min():
            out[me] -= 1.0
            return list(out)
        same = [i for i in range(len(lv)) if ranks[i] == ranks[me]]
        if len(same) > 1:
            for i, b in zip(greedy_hv_order(lv[same]), -np.linspace(0.5, 0.1, len(same))):
                out[same[i]] += b
        return list(out)

    def play(
        self, run: Run, target: float, pools: dict, n: int, may_prune: bool = True, until: int = N_GRID - 1
    ) -> int | None:
        self.rungs_passed, self.stop_settled = [], False
        if not run.ok:
            return None
        best = math.inf
        finished = len(pools.get(("mmp", self.steps[0]), []))  # trials before this one that reported
        for k in self.steps:
            if k > until:
                break
            me = self.vector(run, k, target)
            pool = pools.setdefault(("mmp", k), [])
            prune = False
            if may_prune and pool and finished >= self.n_startup:
                r = self.rewards(pool + [me], len(pool))
                best = min(best, r[-1])
                prune = best > float(np.nanpercentile(r[:-1], self.percentile))
            elif may_prune and not pool:
                best = min(best, 0.0)  # alone at this step: the package gives rank 0
            pool.append(me)
            if prune:
                return k
            self.rungs_passed.append(k)
        return None


def greedy_hv_order(lv: np.ndarray) -> list[int]:
    """Indices of the 2-D loss vectors ``lv`` (one front), the largest hypervolume contribution first,
    greedily (each next point adds the most to those before it), with the package's reference
    point (1.1 x the worst of each objective, or 0.9 x where it is negative); equal vectors tie in
    index order."""
    from effsearch.search.pareto import hypervolume_2d

    worst = lv.max(axis=0)
    ref = tuple(np.maximum(1.1 * worst, 0.9 * worst))
    left, chosen, order = list(range(len(lv))), [], []
    while left:
        base = hypervolume_2d(chosen, ref)
        gain = [hypervolume_2d(chosen + [tuple(lv[i])], ref) - base for i in left]
        i = left[int(np.argmax(gain))]
        same = [j for j in left if tuple(lv[j]) == tuple(lv[i])]
        order += same
        chosen.append(tuple(lv[i]))
        left = [j for j in left if j not in same]
    return order


class LossThenPred(Rule):
    """A cheap first look, then the default's: val loss at 1/27 keeping the best ``1/eta1`` (a
    trial that already reached the target first; the point scored whole), then the default's rung
    at 1/9 (predicted time and accuracy, ``1/eta2`` of those that reached it). A candidate:
    loss at 1/27 puts 26 of the 34 recorded hits in its best ninth, so a
    lenient cut there should keep them and stop most trials at a third of the 1/9 cost."""

    def __init__(self, eta1: float = 3.0, eta2: float = 3.0):
        from effsearch.search.pruners import MOASHAPruner

        super().__init__("pred", 1 / 9, eta=9)  # one rung at 1/9 ...
        # ... keeping 1/eta2
        self.eta, self.product = eta2, MOASHAPruner(eta2, 1 / 9, self.min_trials, rank="predicted")
        self.first = Rule("loss", 1 / 27, eta=27)  # one rung (the losses stop at the first ninth) ...
        self.first.eta = eta1  # ... keeping 1/eta1 there
        self.early = [grid_index(1 / 27)]
        self.name = f"loss@1/27-eta{eta1:g}+pred@1/9-eta{eta2:g}"

    reads_loss = True

    def play(
        self, run: Run, target: float, pools: dict, n: int, may_prune: bool = True, until: int = N_GRID - 1
    ) -> int | None:
        self.rungs_passed, self.stop_settled = [], False
        if not run.ok:
            return None
        for rule, k in ((self.first, self.early[0]), (self, 0)):
            if k > until:
                return None
            if not rule.judge(run, k, target, pools.setdefault((rule.name, k), []), may_prune):
                self.stop_settled = rule.stop_settled
                return k
            self.rungs_passed.append(k)
        return None


class TimeRule(Rule):
    """The product's ``clock: time`` (once the default, now an option): one rung at ``share`` x the
    baseline's time to target, in train seconds. Every trial is judged at its first evaluation at or
    past it (EARLY points included), on accuracy, by the product's ``keep_by_accuracy``; a trial
    whose budget ends before it is never cut; the baseline's point there is a peer. ``T`` is set
    per search from that search's baseline run (research/replay/world.py); a baseline that missed the target gives
    none, and the product falls back to its budget rungs (``pred``, eta as given). ``pred`` as kind:
    a variant ranking as the budget rungs do (fronts over predicted time and accuracy)."""

    def __init__(self, share: float = 0.15, eta: float = 9.0, kind: str = "acc"):
        super().__init__(kind, 1 / 9, eta)
        self.share, self.T, self._extra = share, None, 0
        self.fallback = Rule("pred", 1 / 9, eta)
        self.name = (
            f"moasha-time@{share:g}" + (f"-eta{eta:g}" if eta != 9 else "") + ("-pred" if kind == "pred" else "")
        )

    def extra(self, k: int) -> int:  # the run just played: one evaluation before the ninths if judged there
        return self._extra if self.T is not None else self.fallback.extra(k)

    def play(
        self, run: Run, target: float, pools: dict, n: int, may_prune: bool = True, until: int = N_GRID - 1
    ) -> int | None:
        from effsearch.search.pruners import RungPoint

        if self.T is None:
            self.fallback.settle = self.settle
            stop = self.fallback.play(run, target, pools, n, may_prune, until)
            self.rungs_passed, self.stop_settled = self.fallback.rungs_passed, self.fallback.stop_settled
            return stop
        self._extra = 0
        self.rungs_passed, self.stop_settled = [], False
        if not run.ok:
            return None
        first = -len(EARLY) if run.early_t else 0
        k = next((j for j in range(first, N_GRID) if run.t_at(j) >= self.T), None)
        if k is None or k == N_GRID - 1 or k > until:
            return None
        self._extra = int(k < 0)
        pool = pools.setdefault("time", [])
        if self.kind == "pred":
            reached = next((run.t_at(j) for j in range(first, k + 1) if run.acc_at(j) >= target), None)
            me = RungPoint(run.extrapolated_ttt(k, target, first), run.acc_at(k), reached is not None)
            keep = self.product.decide(me, pool) if may_prune else True
        else:
            me = run.acc_at(k)
            keep = self.product.keep_by_accuracy(me, pool) if may_prune else True
            if not keep and self.settle is not None:
                self.stop_settled = not self.product.keep_by_accuracy(self.settle.upper(me), pool)
        pool.append(me)
        if keep:
            self.rungs_passed = [k]
        return None if keep else k
