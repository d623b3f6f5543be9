"""One replayed run: a configuration's curve on the evaluation grid and what each part of it costs.

A run is evaluated at every ninth of its budget (``GRID``), and, where the early table has it
(``research/data/quickstart_early.jsonl``, ``research/record_early.py``), at 1/27 and 2/27
(``EARLY``), so a rung can sit before the first ninth. A run's k-th ninth is the recorder's k-th
evaluation: the recorder evaluated every round(epochs / 9 x steps an epoch) steps, so in half
the runs that evaluation falls a fraction of a step short of k/9 (``grid_run``).

What a trial costs is what it would cost in a study: its overhead (set-up, data, model; the wall
time not spent training or evaluating), its train seconds up to where it stopped, each
evaluation it ran (a point settled on its first batch, as the product scores it, costs that
batch's share: ``Settle``), and the final evaluation (none for a pruned trial, whose rung
evaluation scored the delivered model). A trial still short of the target at max_slowdown's
mark stops there (``Run.slow_stop``), as the product's ``SlowStop`` stops it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

N_GRID = 9  # evaluations per run, at every 1/9 of the budget
GRID = [(k + 1) / N_GRID for k in range(N_GRID)]
# Evaluations before the first ninth (research/record_early.py), for rungs there. A rung at
# EARLY[i] is grid position i - len(EARLY) (negative): what runs before the ninths.
EARLY = (1 / 27, 2 / 27)
FIDELITIES = ("full", "tune20", "tune50")
LOSS_CAP = 50.0  # a diverged run's loss (nan, inf) is read as this
# The product's max_slowdown (study file default; SlowStop, with its floor of a second past the
# baseline's time): a trial short of the target at 4x the search's baseline time to target stops.
MAX_SLOWDOWN = 4.0


@dataclass
class Run:
    """A run on the evaluation grid: train seconds and val accuracy at each ninth, the delivered
    model's accuracy, and what each part costs."""

    t: list  # train seconds at each grid point
    acc: list  # val accuracy at each grid point
    final: float  # the delivered model's val accuracy
    overhead: float  # set-up, data, model, process: wall time not training or evaluating
    eval_s: float  # seconds per evaluation
    final_eval: float  # final val + test evaluation
    ok: bool = True  # completed (not diverged/failed)
    early_t: tuple = ()  # train seconds and val accuracy at EARLY (evaluated only for a rung there)
    early_acc: tuple = ()
    early_loss: tuple = ()  # val loss at EARLY and at the first ninth (LOSS_TABLE), for rungs ranked on it

    def loss_at(self, k: int) -> float | None:
        """Val loss at grid position ``k`` where recorded (the EARLY points and the first ninth)."""
        i = k + len(EARLY)
        return self.early_loss[i] if self.early_loss and 0 <= i < len(self.early_loss) else None

    def with_acc(self, k: int, accuracy: float) -> Run:
        """This run with its accuracy at grid position ``k`` replaced (a bound, to ask a rule)."""
        if k < 0:
            early = list(self.early_acc)
            early[k + len(EARLY)] = accuracy
            return dataclasses.replace(self, early_acc=tuple(early))
        acc = list(self.acc)
        acc[k] = accuracy
        return dataclasses.replace(self, acc=acc)

    def t_at(self, k: int) -> float:
        return self.early_t[k + len(EARLY)] if k < 0 else self.t[k]

    def acc_at(self, k: int) -> float:
        return self.early_acc[k + len(EARLY)] if k < 0 else self.acc[k]

    def ttt(self, target: float) -> float | None:
        if not self.ok or self.final < target:
            return None
        return next((t for t, a in zip(self.t, self.acc) if a >= target), None)

    def cost(self, k: int, pruned: bool = False, extra: int = 0, evals: float | None = None) -> float:
        """Compute spent by a trial that stopped after grid position ``k``, with ``extra``
        evaluations before the ninths (its rungs there). A pruned trial runs no final evaluation
        (its rung evaluation scored the delivered model; nobody reads its test). ``evals``: its
        evaluations' seconds (``evals()``); default every point scored whole."""
        if evals is None:
            evals = self.evals(k, 0.0, None, extra=extra)
        return self.overhead + self.t_at(k) + evals + (0.0 if pruned else self.final_eval)

    def evals(
        self, k: int, target: float, settle, whole=(), stop: bool = False, stop_settled: bool = False, extra: int = 0
    ) -> float:
        """Seconds of the evaluations at grid positions 0..``k`` (and ``extra`` before the ninths,
        scored whole) when each point is scored on as much of the validation set as its decision
        needs (the product's ``settle``): a point under the target by its upper bound on the first
        batch, or after the target was reached, costs ``settle.share`` of a whole one. Whole: the
        positions in ``whole`` (rungs the trial was kept at), the run's end, and the point it was
        stopped at (``stop``) unless the rule prunes it even at that bound (``stop_settled``).
        ``settle`` None: every point whole (``--whole-evals``)."""
        if settle is None:
            return self.eval_s * (max(k + 1, 0) + extra)
        total, reached = self.eval_s * extra, False
        for j in range(0, k + 1):
            a = self.acc_at(j)
            if j == k and stop:
                part = stop_settled
            else:
                part = j not in whole and j != N_GRID - 1 and (reached or settle.upper(a) < target)
            total += self.eval_s * (settle.share if part else 1.0)
            reached = reached or a >= target
        return total

    def slow_stop(self, limit: float | None, target: float) -> int | None:
        """max_slowdown (the product's ``SlowStop``): where a run still short of ``target`` when it has
        trained ``limit`` seconds stops. The last grid position before the mark (-1: none), or None
        when the limit never applies (no limit, the budget ends first, the target reached first)."""
        if limit is None or not self.ok or self.t[-1] <= limit:
            return None
        k = -1
        for j in range(N_GRID):
            if self.t[j] >= limit:
                break
            if self.acc[j] >= target:
                return None
            k = j
        return k

    def slow_cost(self, k: int, limit: float, target: float, settle, whole=(), extra: int = 0) -> float:
        """Compute of a run stopped at ``limit`` seconds by max_slowdown, ``k`` its last grid position
        before the mark: its evaluations to there, one more at the mark (settled on its first batch
        where the curve is under the target there, as the product's is), no final evaluation."""
        mark = settle.share if settle is not None and settle.upper(self.acc[k + 1]) < target else 1.0
        return self.overhead + limit + self.evals(k, target, settle, whole, extra=extra) + self.eval_s * mark

    def extrapolated_ttt(self, k: int, target: float, first: int = 0) -> float:
        """Time to target so far, or predicted from the curve as the product's pruner predicts it.
        ``first``: the run's first evaluation (a negative position if it had rungs before the ninths)."""
        from effsearch.search.pruners import predicted_time

        for j in range(first, k + 1):
            if self.acc_at(j) >= target:
                return self.t_at(j)
        prev = (self.t_at(k - 1), self.acc_at(k - 1)) if k > first else None
        return predicted_time(self.t_at(k), self.acc_at(k), EARLY[k + len(EARLY)] if k < 0 else GRID[k], target, prev)


@dataclass(frozen=True)
class Settle:
    """How the product scores a point on part of the validation set: its first batch (``n``
    images, shuffled) costs ``share`` of a whole evaluation (``images`` in all); the decision is
    read off the upper bound there (trainer/loop.py, ``accuracy_upper``) at the recorded accuracy."""

    n: int
    images: int

    @property
    def share(self) -> float:
        return self.n / self.images

    def upper(self, accuracy: float) -> float:
        return _upper(round(accuracy * self.n), self.n)


@functools.cache
def _upper(correct: int, n: int) -> float:
    from effsearch.trainer.loop import accuracy_upper

    return accuracy_upper(correct, n)


def grid_run(rec: dict, epochs: float, overhead_cap: float, early=None) -> Run:
    """A recorded run on the grid: at each ninth, the recorder's evaluation meant for it (the
    nearest; the end for the last). The recorder evaluated every round(epochs / 9 x batches an
    epoch) steps, so in half the runs the k-th evaluation falls a fraction of a step short of
    k/9 (taking the first evaluation at or past k/9 would put those runs' first rung at 2/9).
    ``early``: that run's points at EARLY (train seconds as shares of its 3/27 point's,
    research/record_early.py), put on this run's clock."""
    hist = rec.get("history") or []
    if rec.get("status") in (None, "failed") or not hist:
        w = rec.get("wall_seconds") or 0.0
        return Run(
            [0.0] * N_GRID,
            [0.0] * N_GRID,
            0.0,
            min(w, overhead_cap),
            0.0,
            0.0,
            ok=False,
            early_t=(0.0,) * len(EARLY) if early else (),
            early_acc=(0.0,) * len(EARLY) if early else (),
        )
    t, acc = [], []
    for g in GRID:
        p = hist[-1] if g == 1 else min(hist[:-1] or hist, key=lambda p: abs(p[0] / epochs - g))
        t.append(p[1])
        acc.append(p[2] if p[2] == p[2] else 0.0)
    ev = (rec.get("eval_seconds") or 0.0) / max(len(hist), 1)
    fe = rec.get("final_eval_seconds") or 0.0
    train = rec.get("train_seconds") or t[-1]
    over = max(0.0, (rec.get("wall_seconds") or 0.0) - train - (rec.get("eval_seconds") or 0.0) - fe)
    final = rec.get("val_accuracy")
    final = final if isinstance(final, (int, float)) and final == final else acc[-1]
    ok = rec["status"] == "completed"
    et = tuple(share * t[0] for share, _ in early) if early else ()
    ea = tuple(a for _, a in early) if early else ()
    return Run(t, acc, float(final), min(over, overhead_cap), ev, fe, ok, et, ea)


def early_points(points, epochs: float):
    """A run's points at EARLY as (share of its 3/27 point's train seconds, val accuracy). The
    recorder evaluated at the first step at or past each (as the product places a rung's point),
    so a run of a few steps an epoch has fewer points: its first step is its earliest look."""
    if not points or points[-1][1] <= 0:
        return None
    out = []
    for e in EARLY:
        q = next((q for q in points if q[0] >= e * epochs - 1e-4), points[-1])
        out.append((q[1] / points[-1][1], q[2]))
    return out


def loss_points(points, epochs: float) -> tuple:
    """A run's val loss at EARLY and at 3/27 (its first ninth), as early_points picks its points;
    a run without points, or a loss that is not finite, reads LOSS_CAP."""
    out = []
    for e in EARLY + (3 / 27,):
        q = next((q for q in points if q[0] >= e * epochs - 1e-4), points[-1]) if points else None
        v = q[3] if q is not None and len(q) > 3 and q[3] is not None else LOSS_CAP
        out.append(min(float(v), LOSS_CAP) if math.isfinite(v) else LOSS_CAP)
    return tuple(out)
