"""Rung rules: where a search's rungs are and how a trial is ranked there.

``Rule("product")`` and ``Rule("pred")`` are effsearch's MOASHAPruner (its rungs and its
``decide``, ``rank: spent`` and ``rank: predicted``); the other kinds are candidates compared
beside it (research/replay/candidates.py holds the larger ones). ``OracleRule`` knows every
outcome: the yardstick for every rule.
"""

from __future__ import annotations

import math

from research.replay.run import EARLY, GRID, N_GRID, Run


class Rule:
    """A rung rule: where the rungs are and how a trial is ranked there. ``product`` is
    effsearch's MOASHAPruner (its rungs and its ``decide``); the others are candidates, measured
    beside it (docs/benchmarks.md, search efficiency):

        acc   rank on accuracy at the rung (ASHA)
        ttt   rank on the time to target predicted from the curve so far (reached: its time;
              else the last slope extrapolated), ties by accuracy
        pred  the product's MO-ASHA with ``rank: predicted``: fronts over (time to target
              predicted from the curve so far, accuracy), the more accurate first within a front
              (``product`` is ``rank: spent``: seconds so far, ties by crowding)
        hb    Hyperband: trials take brackets in turn, bracket b's first rung at min_fraction*eta**b,
              each bracket its own rungs; accuracy ranking
        loss  val loss at the rung, the lowest first (a trial that reached the target before any
              that did not): ASHA on loss; rungs up to the first ninth only, where LOSS_TABLE has
              it. Scored whole (no exact bound on a mean loss from part of the images). Measured
              and not built (docs/benchmarks.md)
    """

    def __init__(
        self,
        kind: str,
        min_fraction: float = 1 / 9,
        eta: float = 3.0,
        min_trials: int | None = None,
        keep_fastest: bool = True,
    ):
        from effsearch.search.pruners import MOASHAPruner

        knobs = {} if min_trials is None else {"min_trials": min_trials}  # None: the product's default
        self.product = MOASHAPruner(eta, min_fraction, rank="predicted" if kind == "pred" else "spent", **knobs)
        self.product.keep_fastest = keep_fastest  # the product keeps a rung's fastest to the target
        self.kind, self.eta, self.min_trials = kind, eta, self.product.min_trials
        self.settle = None  # World's Settle, set by search(): the stop point's cost
        self.rungs_passed, self.stop_settled = [], False  # the run just played: kept at; stopped settled
        self.brackets = []
        if kind == "hb":
            f = min_fraction
            while f < 1 - 1e-9:
                self.brackets.append(MOASHAPruner(eta, f, self.min_trials).rungs())
                f *= eta
            self.brackets.append([])  # the last bracket never prunes
        else:
            self.brackets.append(self.product.rungs())
        # The curves hold an evaluation at every ninth (and at EARLY): a rung between two would be
        # decided on a later point than a real run has, and charged as if it stopped there.
        if kind == "loss" and any(r > GRID[0] + 1e-9 for b in self.brackets for r in b):
            raise ValueError("rank loss: the recorded losses stop at the first ninth; no rung after it")
        off = [
            r
            for b in self.brackets
            for r in b
            if abs(r * N_GRID - round(r * N_GRID)) > 1e-6 and not any(abs(r - e) < 1e-9 for e in EARLY)
        ]
        if off:
            raise ValueError(
                f"rungs {off} are not on the replay's grid (every 1/{N_GRID} of the budget, "
                f"and {', '.join(map(frac, EARLY))})"
            )
        # Rungs before the first ninth: evaluations a full-fidelity run would not have had.
        self.early = sorted({grid_index(r) for b in self.brackets for r in b if grid_index(r) < 0})
        self.name = (
            {
                "product": "moasha",
                "acc": "asha-acc",
                "ttt": "asha-ttt",
                "hb": "hyperband",
                "pred": "moasha-pred",
                "loss": "asha-loss",
            }[kind]
            + f"@{frac(min_fraction)}"
            + (f"-eta{eta:g}" if eta != 3 else "")
        )

    def extra(self, k: int) -> int:
        """Evaluations before the ninths that a trial stopped at position ``k`` ran (its early rungs)."""
        return sum(1 for e in self.early if e <= k)

    def play(
        self, run: Run, target: float, pools: dict, n: int, may_prune: bool = True, until: int = N_GRID - 1
    ) -> int | None:
        """Feed ``run`` through its rungs; the grid position it was pruned at, or None (completed).
        With ``may_prune`` False (the baseline) its points are only recorded for the others.
        ``until``: the last position the run reaches (max_slowdown stops it after; later rungs
        never see it)."""
        self.rungs_passed, self.stop_settled = [], False
        if not run.ok:
            return None
        for b in range(len(self.brackets)) if not may_prune else [n % len(self.brackets)]:
            for r in self.brackets[b]:
                k = grid_index(r)
                if k > until:
                    break
                if not self.judge(run, k, target, pools.setdefault((b, k), []), may_prune):
                    return k
                self.rungs_passed.append(k)
        return None

    @property
    def reads_loss(self) -> bool:
        """Whether the rule ranks on val loss somewhere (the surrogate must then answer losses)."""
        return self.kind == "loss"

    def judge(self, run: Run, k: int, target: float, pool: list, may_prune: bool = True) -> bool:
        """One rung at grid position ``k``: True if ``run`` goes on. Its point joins ``pool`` either
        way; ``stop_settled``: a stopped run is pruned even at its first batch's upper bound."""
        me = self.point(run, k, target)
        keep = self.decide(me, pool) if may_prune else True
        self.stop_settled = False
        # Pruned even at the first batch's upper bound?
        if not keep and self.settle is not None and self.kind != "loss":
            self.stop_settled = not self.decide(
                self.point(run.with_acc(k, self.settle.upper(run.acc_at(k))), k, target), pool
            )
        pool.append(me)
        return keep

    def point(self, run: Run, k: int, target: float):
        from effsearch.search.pruners import RungPoint

        first = self.early[0] if self.early else 0  # the run's first evaluation
        reached = next((run.t_at(j) for j in range(first, k + 1) if run.acc_at(j) >= target), None)
        if self.kind == "product":
            return RungPoint(reached if reached is not None else run.t_at(k), run.acc_at(k), reached is not None)
        if self.kind == "loss":
            return (reached is None, run.loss_at(k))
        if self.kind == "pred":  # the product's predicted time (pruner.predicted_time, via the run)
            return RungPoint(run.extrapolated_ttt(k, target, first), run.acc_at(k), reached is not None)
        return (run.extrapolated_ttt(k, target, first), run.acc_at(k))

    def decide(self, me, peers) -> bool:
        if self.kind in ("product", "pred"):
            return self.product.decide(me, peers)
        n = len(peers) + 1
        if n < self.min_trials:
            return True
        keep = max(1, math.ceil(n / self.eta))
        if self.kind == "ttt":
            better = sum(1 for p in peers if (p[0], -p[1]) < (me[0], -me[1]))
        elif self.kind == "loss":  # (not reached, loss), the smaller first
            better = sum(1 for p in peers if p < me)
        else:
            better = sum(1 for p in peers if p[1] > me[1])
        return better < keep


class OracleRule(Rule):
    """Not a rule anyone can run: the yardstick for every rule. It knows each trial's whole
    outcome, and at the first rung keeps exactly the trials that will raise the search's
    hypervolume (a hit outside the front found so far, baseline included); every other trial
    stops there. A rung rule that never erred would save this much: the sampler still has to
    propose the recipe, and every trial still pays up to the first rung. (Not a strict bound: a
    rule that also skipped trials raising the hypervolume a little could do slightly better.)
    ``ref`` (the reference point) is set before the searches run (research/replay/cli.py)."""

    def __init__(self, min_fraction: float = 1 / 9):
        super().__init__("product", min_fraction)
        self.name = f"oracle@{frac(min_fraction)}"
        self.ref = None

    def play(
        self, run: Run, target: float, pools: dict, n: int, may_prune: bool = True, until: int = N_GRID - 1
    ) -> int | None:
        from effsearch.search.pareto import hypervolume_2d

        self.rungs_passed, self.stop_settled = [], False
        front = pools.setdefault("oracle", [])
        if grid_index(self.brackets[0][0]) > until:
            return None  # stopped by max_slowdown before its rung (and no hit)
        h = run.ttt(target) if run.ok else None
        p = (h, -run.final) if h is not None else None
        if not may_prune or not run.ok:
            if p is not None:
                front.append(p)
            return None
        if p is not None and hypervolume_2d(front + [p], self.ref) > hypervolume_2d(front, self.ref) + 1e-12:
            front.append(p)
            self.rungs_passed = [grid_index(self.brackets[0][0])]
            return None
        return grid_index(self.brackets[0][0])  # scored whole: an oracle's stop is no bound's


def grid_index(rung: float) -> int:
    """The grid position a rung at ``rung`` of the budget is decided on (Rule refuses off-grid
    rungs): negative for EARLY."""
    for i, e in enumerate(EARLY):
        if abs(rung - e) < 1e-9:
            return i - len(EARLY)
    return min(N_GRID - 1, max(0, round(rung * N_GRID) - 1))


def frac(f: float) -> str:
    for d in (9, 3, 2, 1, 27):
        if abs(f * d - round(f * d)) < 1e-6:
            return f"{round(f * d)}/{d}" if d > 1 else "1"
    return f"{f:g}"
