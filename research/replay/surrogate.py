"""How a proposal is answered: a surrogate fitted on the recorded table.

Samplers propose continuous values, which no table holds, and a nearest-neighbour look-up in a
25-dimensional conditional space is mostly noise. So a surrogate answers: random forests on the
encoded parameters (``table.Encoder``) predict a run's whole curve (accuracy at each ninth of
the budget and the delivered model's accuracy) and its costs (train seconds, overhead, seconds
per evaluation, final evaluation). A real run is not the mean of its neighbours: each answer
adds the out-of-fold residual curve of one recorded row among the 10 the forest predicted most
alike (chosen by a hash of the parameters, so the same configuration always gets the same
answer, as a seeded rerun does; errors are small at chance and near the top, large between). A
proposal is answered by one fold's forests (by the hash), as a held-out row would be, and
accuracies are modelled in logits, so that residuals, which belong to out-of-fold predictions,
do not lift answers past every recorded run. ``CondSurrogate`` (``--cond``) answers in two
stages: the first ninth from the parameters, the rest of the curve given that first ninth.
``RowFull`` answers a recorded row with its own run (the rows-replay cross-check).

The surrogate is checked on held-out rows (5-fold, ``validate``): rank correlation of final
accuracy and of time to target; the rung-vs-final Kendall tau of its answers beside the
recorded runs' (``tau_table``: a surrogate whose early rungs predict the end better than real
curves do would flatter pruning); and its answers to 1,000 random configurations beside the
table's top (``tail_check``), where fronts are made.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import optuna

from research.replay.rules import frac
from research.replay.run import EARLY, GRID, N_GRID, Run
from research.replay.table import Table

EPS = 1e-3


def _logit(a):
    a = np.clip(np.asarray(a, dtype=float), EPS, 1 - EPS)
    return np.log(a / (1 - a))


def _targets(runs: list[Run]) -> tuple[np.ndarray, np.ndarray]:
    # Accuracy in logits: a residual that lifted a middling row by 0.05 lifts a row near the top by
    # far less, as accuracy saturates (added as accuracies, they pushed answers past 1.0 to the clip).
    acc = _logit([r.acc + [r.final] for r in runs])
    cost = np.array(
        [
            [
                math.log(max(r.t[-1], 1e-3)),
                math.log(max(r.overhead, 1e-3)),
                math.log(max(r.eval_s, 1e-4)),
                math.log(max(r.final_eval, 1e-4)),
                float(r.ok),
            ]
            for r in runs
        ]
    )
    return acc, cost


class Surrogate:
    """Random forests from the encoded parameters to one fidelity's curve and costs, plus
    out-of-fold residuals to add back (a real run is one draw, not the forest's mean)."""

    def __init__(self, table: Table, fid: str, seed: int = 0, folds: int = 5, losses: bool = False):
        from sklearn.model_selection import KFold

        keep = [i for i, r in enumerate(table.rows) if fid + "_run" in r]
        self.X = table.X[keep]
        runs = [table.rows[i][fid + "_run"] for i in keep]
        self.runs = runs
        self.early = fid == "full" and all(len(r.early_acc) == len(EARLY) for r in runs)
        self.acc, self.cost = _targets(runs)
        # The points before the first ninth get forests of their own (a multi-output forest shares
        # its splits between outputs: added to the curve's, they changed every other answer).
        self.eacc = _logit([r.early_acc for r in runs]) if self.early else None
        # Val losses (a forest more a proposal) only for a rule that reads them.
        self.has_loss = losses and fid == "full" and all(len(r.early_loss) == len(EARLY) + 1 for r in runs)
        self.eloss = np.log([r.early_loss for r in runs]) if self.has_loss else None
        self.set_profiles(runs)

        def forest():
            return self.forest(seed)

        # A proposal is answered as a held-out row would be: by one fold's forests (chosen by a hash
        # of the parameters), plus the out-of-fold residual of a row those forests' kind predicted
        # alike. Residuals belong to out-of-fold predictions: added to a forest fitted on every row
        # (less shrunk at the top) they stacked shrinkage twice, and the surrogate's best answers
        # were 1.0 val accuracy at 0.7 s to target, where no recorded run got above 0.986 or under 1.2 s.
        self.oof_acc, self.oof_cost = np.zeros_like(self.acc), np.zeros_like(self.cost)
        self.oof_eacc = np.zeros_like(self.eacc) if self.early else None
        self.oof_eloss = np.zeros_like(self.eloss) if self.has_loss else None
        self.folds = []
        for tr, te in KFold(folds, shuffle=True, random_state=seed).split(self.X):
            fa, fc = forest().fit(self.X[tr], self.acc[tr]), forest().fit(self.X[tr], self.cost[tr])
            self.oof_acc[te], self.oof_cost[te] = fa.predict(self.X[te]), fc.predict(self.X[te])
            fe = forest().fit(self.X[tr], self.eacc[tr]) if self.early else None
            if fe is not None:
                self.oof_eacc[te] = fe.predict(self.X[te])
            fl = forest().fit(self.X[tr], self.eloss[tr]) if self.has_loss else None
            if fl is not None:
                self.oof_eloss[te] = fl.predict(self.X[te])
            self.folds.append((fa, fc, fe, fl))
        self.res_acc, self.res_cost = self.acc - self.oof_acc, self.cost - self.oof_cost
        self.res_eacc = self.eacc - self.oof_eacc if self.early else None
        self.res_eloss = self.eloss - self.oof_eloss if self.has_loss else None
        self.order = np.argsort(self.oof_acc[:, -1])
        self.by_pred = self.oof_acc[self.order, -1]
        self.cache: dict = {}

    def set_profiles(self, runs: list[Run]) -> None:
        """The time profile: train seconds at each ninth (and at EARLY) as a share of the whole,
        median over the runs that completed."""
        ok = [r for r in runs if r.ok and r.t[-1] > 0]
        self.profile = np.median([[t / r.t[-1] for t in r.t] for r in ok], axis=0)
        self.early_profile = np.median([[t / r.t[-1] for t in r.early_t] for r in ok], axis=0) if self.early else []

    @staticmethod
    def forest(seed: int):
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(
            n_estimators=200, min_samples_leaf=1, max_features=0.33, random_state=seed, n_jobs=1
        )

    @staticmethod
    def predict(model, x: list[float]) -> np.ndarray:
        """One row through the forest's trees directly (sklearn's predict costs ~40 ms a call)."""
        xa = np.asarray([x], dtype=np.float32)
        return np.mean([e.tree_.predict(xa)[0, :, 0] for e in model.estimators_], axis=0)

    def make(self, acc_row, cost_row, early_row=None, loss_row=None) -> Run:
        acc = 1 / (1 + np.exp(-np.asarray(acc_row)))
        t_total = math.exp(cost_row[0])
        early = () if early_row is None else tuple(float(a) for a in 1 / (1 + np.exp(-np.asarray(early_row))))
        return Run(
            [float(t_total * p) for p in self.profile],
            [float(a) for a in acc[:-1]],
            float(acc[-1]),
            math.exp(cost_row[1]),
            math.exp(cost_row[2]),
            math.exp(cost_row[3]),
            ok=cost_row[4] >= 0.5,
            early_t=tuple(float(t_total * p) for p in self.early_profile) if early else (),
            early_acc=early,
            early_loss=() if loss_row is None else tuple(float(v) for v in np.exp(loss_row)),
        )

    def __call__(self, x: list[float], key: str) -> Run:
        if key in self.cache:
            return self.cache[key]
        h = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)
        m_acc, m_cost, m_early, m_loss = self.folds[h % len(self.folds)]
        mean = self.predict(m_acc, x)
        j = self.alike(mean[-1], h // len(self.folds))
        acc = mean + self.res_acc[j]
        cost = self.predict(m_cost, x) + self.res_cost[j]
        cost[4] = 1.0 if cost[4] >= 0.5 else 0.0
        early = self.predict(m_early, x) + self.res_eacc[j] if self.early else None
        loss = self.predict(m_loss, x) + self.res_eloss[j] if self.has_loss else None
        run = self.make(acc, cost, early, loss)
        self.cache[key] = run
        return run

    def alike(self, final: float, draw: int) -> int:
        """The row whose residual an answer borrows: one of the 10 nearest to ``final`` in out-of-fold
        predicted final accuracy (the ``draw``-th, wrapped), as errors are small at chance and near
        the top, large between."""
        pos = int(np.searchsorted(self.by_pred, final))
        lo = max(0, min(pos - 5, len(self.order) - 10))
        return int(self.order[lo + draw % min(10, len(self.order))])

    def held_out(self) -> list[Run]:
        """Out-of-fold predictions (no residual) for every recorded row."""
        return [
            self.make(a, c, self.oof_eacc[i] if self.early else None, self.oof_eloss[i] if self.has_loss else None)
            for i, (a, c) in enumerate(zip(self.oof_acc, self.oof_cost))
        ]

    def held_out_answers(self, rng) -> list[Run]:
        """Every recorded row answered as a held-out proposal is: out-of-fold mean plus the residual
        of a row predicted alike (what the searches see)."""
        out = []
        for i in range(len(self.runs)):
            j = self.alike(self.oof_acc[i, -1], int(rng.integers(min(10, len(self.order)))))
            out.append(
                self.make(
                    self.oof_acc[i] + self.res_acc[j],
                    self.oof_cost[i],
                    self.oof_eacc[i] + self.res_eacc[j] if self.early else None,
                    self.oof_eloss[i] + self.res_eloss[j] if self.has_loss else None,
                )
            )
        return out


class CondSurrogate(Surrogate):
    """The surrogate in two stages, as a run unfolds: the parameters give the first ninth (the
    accuracy at 1/27, 2/27 and 1/9 and the val loss there: what a rung before or at 1/9 sees), and
    the parameters *and that first ninth* give the rest of the curve. Each stage adds the
    out-of-fold residual of a row predicted alike. Why: ``Surrogate`` draws the whole curve from
    one borrowed residual, which keeps how a run's accuracy at 1/9 goes with its end (smooth
    curves) but not how its val loss there does: on held-out answers loss at 1/27 put 18 of 39
    hits in the top ninth, on the recorded runs 26 of 34. A rule that ranks on the first ninth is
    only judged fairly if what follows depends on it as it does in the recordings."""

    def __init__(self, table: Table, fid: str, seed: int = 0, folds: int = 5, losses: bool = True):
        from sklearn.model_selection import KFold

        if fid != "full":
            raise ValueError("CondSurrogate models full-fidelity runs (their first ninth is recorded)")
        keep = [i for i, r in enumerate(table.rows) if fid + "_run" in r]
        self.X = table.X[keep]
        runs = [table.rows[i][fid + "_run"] for i in keep]
        self.runs = runs
        self.early = all(len(r.early_acc) == len(EARLY) for r in runs)
        self.has_loss = all(len(r.early_loss) == len(EARLY) + 1 for r in runs)
        if not (self.early and self.has_loss):
            raise ValueError("CondSurrogate needs every run's early points and losses")
        acc, self.cost = _targets(runs)
        # E: early accuracies, early losses, accuracy at 1/9; R: accuracy at 2/9..1 and the final.
        self.E = np.hstack([_logit([r.early_acc for r in runs]), np.log([r.early_loss for r in runs]), acc[:, :1]])
        self.R = acc[:, 1:]
        self.set_profiles(runs)

        def forest():
            return self.forest(seed)

        XE = np.hstack([self.X, self.E])
        self.oof_E, self.oof_R, self.oof_cost = np.zeros_like(self.E), np.zeros_like(self.R), np.zeros_like(self.cost)
        self.fold_of = np.zeros(len(runs), dtype=int)
        self.folds = []
        for f, (tr, te) in enumerate(KFold(folds, shuffle=True, random_state=seed).split(self.X)):
            f1, f2 = forest().fit(self.X[tr], self.E[tr]), forest().fit(XE[tr], self.R[tr])
            fc = forest().fit(self.X[tr], self.cost[tr])
            self.oof_E[te], self.oof_R[te], self.oof_cost[te] = (
                f1.predict(self.X[te]),
                f2.predict(XE[te]),
                fc.predict(self.X[te]),
            )
            self.fold_of[te] = f
            self.folds.append((f1, f2, fc))
        # Residuals of the second stage are taken given the real first ninth (what it adds to it).
        self.res_E, self.res_R, self.res_cost = self.E - self.oof_E, self.R - self.oof_R, self.cost - self.oof_cost
        self.e_scale = self.oof_E.std(axis=0) + 1e-9
        self.order = np.argsort(self.oof_R[:, -1])
        self.by_pred = self.oof_R[self.order, -1]
        self.cache: dict = {}

    def alike_early(self, e_mean: np.ndarray, draw: int) -> int:
        """One of the 10 rows whose predicted first ninth is nearest ``e_mean`` (scaled distance)."""
        d = (((self.oof_E - e_mean) / self.e_scale) ** 2).sum(axis=1)
        near = np.argsort(d, kind="stable")[:10]
        return int(near[draw % len(near)])

    def _answer(self, x, fold: int, d1: int, d2: int, mean_only: bool = False) -> Run:
        f1, f2, fc = self.folds[fold]
        e = self.predict(f1, x)
        if not mean_only:
            e = e + self.res_E[self.alike_early(e, d1)]
        r = self.predict(f2, list(x) + list(e))
        j = self.alike(r[-1], d2)
        cost = self.predict(fc, x)
        if not mean_only:
            r, cost = r + self.res_R[j], cost + self.res_cost[j]
        cost[4] = 1.0 if cost[4] >= 0.5 else 0.0
        n = len(EARLY)
        return self.make(np.concatenate([e[-1:], r]), cost, e[:n], e[n : 2 * n + 1])

    def __call__(self, x: list[float], key: str) -> Run:
        if key in self.cache:
            return self.cache[key]
        h = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)
        k = len(self.folds)
        run = self._answer(x, h % k, (h // k) % 10, (h // (10 * k)) % 10)
        self.cache[key] = run
        return run

    def held_out(self) -> list[Run]:
        return [self._answer(self.X[i], self.fold_of[i], 0, 0, mean_only=True) for i in range(len(self.runs))]

    def held_out_answers(self, rng) -> list[Run]:
        return [
            self._answer(self.X[i], self.fold_of[i], int(rng.integers(10)), int(rng.integers(10)))
            for i in range(len(self.runs))
        ]


class RowFull:
    """The full-fidelity answer of a recorded row (for the rows-replay cross-check)."""

    def __init__(self, table):
        self.by_key = {f"row{r['index']}": r for r in table.rows}

    def __call__(self, x, key):
        return self.by_key[key]["full_run"]


def tau_table(table: Table, target: float, tune_target: float, sur: dict) -> list[str]:
    """Kendall tau of each rung's accuracy (and of the subset fidelities) with final accuracy."""
    from scipy.stats import kendalltau, spearmanr

    lines = []
    full = [r for r in table.rows if r["full_run"].ok]
    fin = [r["full_run"].final for r in full]
    ks = list(range(-len(EARLY), 0) if table.early else []) + list(range(N_GRID - 1))
    rung = []
    for k in ks:
        rung.append(kendalltau([r["full_run"].acc_at(k) for r in full], fin).statistic)
    lines.append(
        f"Kendall tau, accuracy at a share of the budget vs final accuracy (recorded full runs, n={len(full)}):"
    )
    lines.append("  share  " + " ".join(f"{frac(EARLY[k + len(EARLY)] if k < 0 else GRID[k]):>5s}" for k in ks))
    lines.append("  real   " + " ".join(f"{t:5.2f}" for t in rung))
    # The surrogate's answers for held-out configurations (forest mean + one recorded residual
    # curve): if its early rungs ranked better than the real ones, it would flatter pruning.
    ans = [a for a in sur["full"].held_out_answers(np.random.default_rng(0)) if a.ok]
    srung = [kendalltau([a.acc_at(k) for a in ans], [a.final for a in ans]).statistic for k in ks]
    lines.append("  surr.  " + " ".join(f"{t:5.2f}" for t in srung))
    for fid in ("tune20", "tune50"):
        rows = [r for r in full if fid + "_run" in r and r[fid + "_run"].ok]
        if len(rows) < 3:
            continue
        a = [r[fid + "_run"].final for r in rows]
        b = [r["full_run"].final for r in rows]
        tt = [ttt_score(r[fid + "_run"], tune_target[fid]) for r in rows]
        tf = [ttt_score(r["full_run"], target) for r in rows]
        lines.append(
            f"  {fid}: final accuracy tau {kendalltau(a, b).statistic:.2f} "
            f"(rho {spearmanr(a, b).statistic:.2f}); "
            f"time to target (phase-1 target {tune_target[fid]:.3f} vs {target:g}) tau "
            f"{kendalltau(tt, tf).statistic:.2f}; n={len(rows)}"
        )
    rows = [r for r in full if "seed1_run" in r and r["seed1_run"].ok]
    if len(rows) < 3:
        return lines
    a, b = [r["seed1_run"].final for r in rows], [r["full_run"].final for r in rows]
    ta, tb = [ttt_score(r["seed1_run"], target) for r in rows], [ttt_score(r["full_run"], target) for r in rows]
    lines.append(
        f"  seed 1 vs seed 0 (noise floor): final accuracy tau {kendalltau(a, b).statistic:.2f} "
        f"(rho {spearmanr(a, b).statistic:.2f}), time to target tau "
        f"{kendalltau(ta, tb).statistic:.2f}; n={len(rows)}"
    )
    return lines


def tail_check(sur, table: Table, space, target: float, n: int = 1000) -> list[str]:
    """The surrogate's answers to ``n`` random configurations beside the recorded ones, at the top,
    where fronts are made: rank correlations do not see an answer pushed past every recorded run."""
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=optuna.samplers.RandomSampler(seed=1))
    ans = []
    for _ in range(n):
        trial = study.ask()
        space.sample(trial)
        ans.append(sur(table.encoder(trial.params), json.dumps(trial.params, sort_keys=True, default=str)))
        study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def line(name, runs):
        ok = [r for r in runs if r.ok]
        fin = np.array([r.final for r in ok])
        hits = sorted(h for h in (r.ttt(target) for r in ok) if h is not None)
        return (
            f"  {name:9s} n={len(runs):5d}  reach {target:g}: {len(hits) / len(runs):.3f}; final accuracy 99th "
            f"percentile {np.quantile(fin, 0.99):.3f}, max {fin.max():.3f}; fastest times to target "
            f"{', '.join(f'{h:.2f}' for h in hits[:4])} s"
        )

    return [line("recorded", table.runs("full")), line("answers", ans)]


def ttt_score(run: Run, target: float) -> float:
    """Time to target, a miss ranked after every hit by its shortfall (the product's order)."""
    h = run.ttt(target)
    return h if h is not None else 1e6 * (2 - run.final)


def validate(sur, table, fid, target) -> tuple[float, float, float, float]:
    from scipy.stats import kendalltau, spearmanr

    ho = sur.held_out()
    real = sur.runs
    a, b = [r.final for r in ho], [r.final for r in real]
    ta, tb = [ttt_score(r, target) for r in ho], [ttt_score(r, target) for r in real]
    return (
        spearmanr(a, b).statistic,
        kendalltau(a, b).statistic,
        spearmanr(ta, tb).statistic,
        kendalltau(ta, tb).statistic,
    )
