"""One search: a method (sampler, rung rule, tuning phase) and a seed, run until the compute
budget is spent.

What the sampler is told is what the product tells it: a completed trial's (time to target, or
its train seconds for a miss; final accuracy), and for a miss or a pruned trial its shortfall
from the target as Optuna's constraint, which TPE ranks after every hit. The baseline trial
(trial 0 of every study with ``warm``) is never pruned, and its points at the rungs are the
others' peers there, as in the product. Phase-1 trials cost their subset fidelity's recorded
costs; phase-2 confirmations cost full runs. The sampler's own CPU seconds to propose a trial
are compute too (measured live: TPE's grouped multivariate model costs tenths of a second a
trial, as much as a pruned trial), so those few figures move a little between runs.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import optuna

from effsearch.objectives import shortfall
from effsearch.search.store.storage import set_constraints
from research.replay.candidates import TimeRule
from research.replay.rules import Rule
from research.replay.run import MAX_SLOWDOWN, N_GRID, Run, Settle
from research.replay.table import Table


@dataclass
class Method:
    name: str
    sampler: str = "random"  # random | tpe | nsga2 | gp | qmc, or "rows" (recorded rows, real curves)
    rule: Rule | None = None
    tune: str | None = None  # phase-1 fidelity (tune20 / tune50); None: full fidelity only
    confirm: str = "end"  # end: phase 2 once phase 1 spent its share; rolling: confirm as picks change
    top_k: int = 5
    phase1_share: float = 0.75
    miss: str = "train_seconds"  # what a missed target tells the sampler: train_seconds (product) | extrapolate
    dedupe: bool = False
    n_startup: int = 5  # the product's TPE default (effsearch.config.options.TPEOptions)
    full_fidelity: bool = False  # a plain full-fidelity sampler (the baselines of compute_ratio)
    warm: bool = False  # trial 0 is the study's base config (the product's baseline trial), told to the sampler
    # What carries its shortfall as an Optuna constraint (TPE ranks those after every hit, by
    # the shortfall): "all" (the product: misses and pruned trials), "misses" (a pruned trial
    # carries nothing), "none" (nothing does).
    constraints: str = "all"
    tpe: dict | None = None  # TPE options beside the product's (TPEOptions), for sampler variants
    # What a trial stopped at a rung tells TPE as its constraint: "shortfall" (the product: target
    # minus its accuracy there) or "predicted" (1 + its predicted time to target over the
    # baseline's, capped at 10: pruned trials ranked by how fast their curve heads for the target,
    # after every miss). A candidate, measured and not built.
    pruned_signal: str = "shortfall"


GAMMAS = {  # TPE's split into "good" and "bad" trials, by the number of trials told
    "sqrt": lambda n: min(math.ceil(0.25 * n**0.5), 25),  # hyperopt's
    "cap10": lambda n: min(math.ceil(0.1 * n), 10),
}


class World:
    """Everything a search needs: the space, the answers, the targets and the budget."""

    def __init__(
        self,
        space,
        table: Table,
        surrogates: dict,
        target: float,
        tune_target: float,
        budget: float,
        base=None,
        settle: Settle | None = None,
        max_slowdown: float | None = MAX_SLOWDOWN,
    ):
        self.space, self.table, self.sur, self.base = space, table, surrogates, base
        self.target, self.tune_target, self.budget = target, tune_target, budget
        self.settle = settle  # how a point is scored on part of the validation set (None: always whole)
        self.max_slowdown = max_slowdown  # the product's SlowStop factor (None: no limit)

    def slow_limit(self, base_ttt: float | None) -> float | None:
        """max_slowdown's mark (train seconds) for a search whose baseline reached the target in
        ``base_ttt``, by the product's rule (``SlowStop.mark``); None: no limit."""
        from effsearch.search.pruners import SlowStop

        return SlowStop.mark(self.max_slowdown, base_ttt) if self.max_slowdown and base_ttt is not None else None


def make_sampler(m: Method, seed: int):
    from effsearch.config.options import GPOptions, Named, NoOptions, NSGAOptions, TPEOptions
    from effsearch.search.study.samplers import make_sampler as product

    if m.sampler in ("random", "rows"):
        return product(Named("random", NoOptions()), seed)
    if m.sampler == "tpe":
        opts = dict(m.tpe or {})
        extra = {"gamma": GAMMAS[opts.pop("gamma")]} if "gamma" in opts else {}  # not a study file's option
        return product(Named("tpe", TPEOptions(n_startup_trials=m.n_startup, **opts)), seed, **extra)
    if m.sampler == "nsga2":
        return product(Named("nsga2", NSGAOptions(population_size=16)), seed)
    if m.sampler == "gp":
        return product(Named("gp", GPOptions(n_startup_trials=m.n_startup)), seed)
    if m.sampler == "qmc":
        return optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
    raise ValueError(m.sampler)


class Search:
    """One method, one seed, until the budget is spent (``run``): the hits on the full data in
    the order they were found, with the compute spent when each was found, and counts."""

    def __init__(self, m: Method, seed: int, w: World):
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        warnings.filterwarnings("ignore")
        self.m, self.seed, self.w = m, seed, w
        self.study = optuna.create_study(directions=["minimize", "maximize"], sampler=make_sampler(m, seed))
        rng = np.random.default_rng(seed)
        self.order = rng.permutation(len(w.table.rows)) if m.sampler == "rows" else None
        self.fid = m.tune or "full"
        self.target = w.tune_target[m.tune] if m.tune else w.target
        self.phase1_budget = w.budget * (m.phase1_share if m.tune and m.confirm == "end" else 1.0)
        self.spent, self.hits, self.pools, self.seen, self.sampler_s = 0.0, [], {}, {}, 0.0
        self.n, self.n_pruned, self.n_slow, self.keys, self.confirmed = 0, 0, 0, [], set()
        self.limit = None  # max_slowdown's mark, in train seconds, once this search's baseline has a time
        self.base_ttt = None  # the baseline's time to target at this search's fidelity (pruned_signal)
        self.phase1 = []  # (key, values, constraint, x, params) of completed phase-1 trials
        if isinstance(m.rule, TimeRule):
            m.rule.T = None  # set from this search's baseline, if it has one
        if m.rule:
            m.rule.settle = w.settle

    def run(self) -> dict:
        if self.m.warm:
            self.baseline()
        if self.order is not None:
            # The recorded rows run no baseline (in every rows method alike), but a product study
            # would have: max_slowdown's mark from the recorded baseline this seed's search would have run.
            base = self.w.table.baseline[self.seed % len(self.w.table.baseline)]
            self.limit = self.w.slow_limit(
                base[self.fid + "_run"].ttt(self.target) if self.fid + "_run" in base else None
            )
        for run, key, x, trial, row in self.proposals():
            self.play(run, key, x, trial, row)
        if self.m.tune:
            self.confirm(_picks(self.phase1, self.m.top_k, self.w))
        return {
            "hits": self.hits,
            "trials": self.n,
            "pruned": self.n_pruned,
            "slow": self.n_slow,
            "distinct": len(set(self.keys)),
            "spent": self.spent,
            "sampler_s": self.sampler_s,
        }

    def baseline(self) -> None:
        """The product trains the base config first (``baseline: {}``) and tells the sampler its
        values. Its answer is a recorded baseline run (real data, a seed per search), at full
        fidelity: with a tuning phase that is phase 2's baseline, paid up front, and phase 1's
        subset baseline is what the sampler is told."""
        m, w, fid, target = self.m, self.w, self.fid, self.target
        base = w.table.baseline[self.seed % len(w.table.baseline)]
        full = base["full_run"]
        if isinstance(m.rule, TimeRule):  # the product reads the rung off this study's baseline
            told_ttt = (base[fid + "_run"] if fid + "_run" in base else full).ttt(target)
            m.rule.T = m.rule.share * told_ttt if told_ttt is not None else None
        # The baseline runs every rung's evaluation too (its points are the others' peers), every
        # point scored whole.
        every = range(N_GRID)
        x_full = m.rule.extra(N_GRID - 1) if m.rule and not m.tune else 0
        self.spent += full.cost(
            N_GRID - 1,
            extra=x_full,
            evals=full.evals(N_GRID - 1, w.target, w.settle, every if m.rule and not m.tune else (), extra=x_full),
        )
        h = full.ttt(w.target)
        if h is not None:
            self.hits.append((self.spent, h, full.final))
        told = base[fid + "_run"] if fid + "_run" in base else full
        self.base_ttt = told.ttt(target)
        self.limit = w.slow_limit(self.base_ttt)
        if m.tune:
            self.spent += told.cost(N_GRID - 1, evals=told.evals(N_GRID - 1, target, w.settle, every if m.rule else ()))
        if self.order is None:
            self.tell_baseline(told)
        if m.rule:  # the product's pruner records the baseline's rung points, never prunes it
            m.rule.play(told, target, self.pools, 0, may_prune=False)

    def tell_baseline(self, told: Run) -> None:
        self.study.enqueue_trial(self.w.space.encode(self.w.base))
        trial = self.study.ask()
        self.w.space.sample(trial)
        ht = told.ttt(self.target)
        if self.m.constraints != "none":
            set_constraints(trial, [shortfall(told.final, ht is not None, self.target)])
        self.study.tell(trial, [ht if ht is not None else told.t[-1], told.final])
        self.n += 1

    def proposals(self):
        """(run, key, x, trial, row) for each trial while phase 1's budget lasts: the recorded rows
        in this seed's order (``rows``), or the sampler's proposals answered by the surrogate."""
        while self.spent < self.phase1_budget:
            if self.order is not None:
                if self.n >= len(self.order):
                    return
                row = self.w.table.rows[self.order[self.n]]
                run = row[self.fid + "_run"] if self.fid + "_run" in row else None
                if run is None:
                    self.n += 1
                    continue
                yield run, f"row{row['index']}", None, None, row
                continue
            trial, key, x = self.ask()
            if self.m.dedupe and key in self.seen:  # the product would answer a repeat from its history
                values, c = self.seen[key]
                if self.m.constraints != "none":
                    set_constraints(trial, [c])
                self.study.tell(trial, list(values))
                self.n += 1
                continue
            yield self.w.sur[self.fid](x, key), key, x, trial, None

    def ask(self):
        t_ask = time.process_time()
        trial = self.study.ask()
        self.w.space.sample(trial)
        ask = time.process_time() - t_ask  # the sampler's own CPU seconds are compute too
        self.spent += ask
        self.sampler_s += ask
        return trial, json.dumps(trial.params, sort_keys=True, default=str), self.w.table.encoder(trial.params)

    def play(self, run: Run, key: str, x, trial, row) -> None:
        """One trial through the rule and max_slowdown, its compute spent and its values told."""
        m = self.m
        self.keys.append(key)
        slow = run.slow_stop(self.limit, self.target)
        stop = (
            m.rule.play(run, self.target, self.pools, self.n, until=N_GRID - 1 if slow is None else slow)
            if m.rule
            else None
        )
        self.n += 1
        if stop is None and slow is not None:  # max_slowdown: stopped at its mark, recorded as pruned
            self.n_pruned, self.n_slow = self.n_pruned + 1, self.n_slow + 1
            x_stop = m.rule.extra(slow) if m.rule else 0
            self.spent += run.slow_cost(
                slow, self.limit, self.target, self.w.settle, m.rule.rungs_passed if m.rule else (), x_stop
            )
            self.tell_pruned(trial, run.acc_at(slow) if slow >= 0 else 0.0)
        elif stop is not None:
            self.n_pruned += 1
            x_stop = m.rule.extra(stop)
            self.spent += run.cost(
                stop,
                pruned=True,
                extra=x_stop,
                evals=run.evals(
                    stop,
                    self.target,
                    self.w.settle,
                    m.rule.rungs_passed,
                    stop=True,
                    stop_settled=m.rule.stop_settled,
                    extra=x_stop,
                ),
            )
            self.tell_pruned(
                trial,
                run.acc_at(stop),
                lambda: run.extrapolated_ttt(stop, self.target, m.rule.early[0] if m.rule.early else 0),
            )
        else:
            self.completed(run, key, x, trial, row)

    def completed(self, run: Run, key: str, x, trial, row) -> None:
        m, target = self.m, self.target
        x_end = m.rule.extra(N_GRID - 1) if m.rule else 0
        self.spent += run.cost(
            N_GRID - 1,
            extra=x_end,
            evals=run.evals(N_GRID - 1, target, self.w.settle, m.rule.rungs_passed if m.rule else (), extra=x_end),
        )
        if not run.ok:
            if trial is not None:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        h = run.ttt(target)
        if h is None:
            tv = run.t[-1] if m.miss == "train_seconds" else run.extrapolated_ttt(N_GRID - 1, target)
        else:
            tv = h
        values = (tv, run.final)
        if trial is not None:
            self.seen[key] = values, shortfall(run.final, h is not None, target)
            if m.constraints != "none":
                set_constraints(trial, [self.seen[key][1]])
            self.study.tell(trial, list(values))
        if not m.tune:
            if h is not None:
                self.hits.append((self.spent, h, run.final))
            return
        self.phase1.append(
            (key, values, 0.0 if h is not None else max(target - run.final, 1e-6), x if x is not None else row, None)
        )
        if m.confirm == "rolling":
            self.confirm(_picks(self.phase1, m.top_k, self.w))

    def tell_pruned(self, trial, accuracy: float, pred=None) -> None:
        """A stopped trial (a rung, or max_slowdown), told as the product stores it: pruned, with
        its shortfall where it stopped (``pred``: a function giving its predicted time to target,
        for ``pruned_signal: predicted``)."""
        if trial is None:
            return
        if self.m.constraints == "all":
            c = shortfall(accuracy, accuracy >= self.target, self.target)
            if self.m.pruned_signal == "predicted" and pred is not None and self.base_ttt and c > 0:
                c = 1.0 + min(pred() / self.base_ttt, 10.0)
            set_constraints(trial, [c])
        self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)

    def confirm(self, picks) -> None:
        """Phase 2: each new pick trained on the full data (no pruner) while the budget lasts."""
        w = self.w
        for key, x in picks:
            if key in self.confirmed or self.spent >= w.budget:
                continue
            self.confirmed.add(key)
            run = w.sur["full"](x, key)
            self.spent += run.cost(N_GRID - 1, evals=run.evals(N_GRID - 1, w.target, w.settle))
            h = run.ttt(w.target)
            if h is not None:
                self.hits.append((self.spent, h, run.final))


def search(m: Method, seed: int, w: World) -> dict:
    """One method, one seed, until the budget is spent (``Search.run``)."""
    return Search(m, seed, w).run()


def _picks(phase1, k: int, w: World):
    """Phase 2's picks, as effsearch.search.study.phases.top_k picks them: hits by non-dominated rank
    with crowding, then misses by shortfall."""
    from effsearch.search.pareto import rank

    feas = [p for p in phase1 if p[2] == 0]
    order = [feas[i] for i in rank([(v[0], -v[1]) for _, v, _, _, _ in feas])]
    order += sorted((p for p in phase1 if p[2] > 0), key=lambda p: p[2])
    out = []
    for key, _, _, x, _ in order[:k]:
        out.append((key, x))
    return out


def product_settle(spec) -> Settle:
    """How the product scores a point on part of the study's validation split (its first batch)."""
    from effsearch.trainer.data.splits import load_splits
    from effsearch.trainer.loop import EVAL_BATCH

    images = len(load_splits(spec.base).val_y)
    return Settle(min(EVAL_BATCH["cpu"], images), images)
