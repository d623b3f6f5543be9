"""A variant searched on the replay (``research/replay``): no training, answers from the surrogate.

The search is the replay's ``Search`` (the product's rule, max_slowdown and costs, what Optuna is
told) with this variant's sampler, target and warm starts: the baseline is a recorded run (a seed
each), the warm starts and the sampler's proposals are answered by the surrogate. With a relative
target the search's target is that baseline's final accuracy less a point, set before any other
trial, as the product resolves it. Every finished full trial is an ``Event``; the best recipe's
speed-up on the seed comes from the surrogate's answers to every recipe (trained or not).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import optuna

from effsearch.objectives import shortfall
from effsearch.search.store.storage import set_constraints
from research.anytime.curve import Event, Search
from research.anytime.variants import Variant
from research.replay.rules import Rule
from research.replay.run import N_GRID, Run
from research.replay.table import Table, baseline_marks, study_target
from research.replay.world import Method, World
from research.replay.world import Search as ReplaySearch

WITHIN = 0.01  # one point of val accuracy


def make_sampler(sampler: dict, seed: int) -> optuna.samplers.BaseSampler:
    """The study file's sampler as ``effsearch run`` builds it."""
    from effsearch.search.study.samplers import check_sampler
    from effsearch.search.study.samplers import make_sampler as product

    return product(check_sampler(sampler), seed)


@dataclass
class Task:
    """A replay table, its study's space and base, the recipes as configs, the surrogate world."""

    world: World
    recipes: list  # (label, TrainConfig)
    unit: float  # a baseline trial's cost (median of the recorded baseline runs), compute seconds
    name: str


def load_task(table_path: Path, study_path: Path, phase1: bool, budget_runs: float) -> Task:
    """The task: the table, a surrogate on its full-fidelity runs, the study's recipes on its base."""
    import dataclasses

    from effsearch.search.study import phases, studyfile
    from research.replay.cli import surrogates
    from research.replay.table import EARLY_TABLE, LOSS_TABLE, TABLE
    from research.replay.world import product_settle

    raw = studyfile.read_yaml(study_path, studyfile.MINIMAL_STUDY)
    raw["warm_start"] = ["recipes"]
    spec = studyfile.from_mapping(raw, study_path)
    if phase1:
        spec = dataclasses.replace(spec, base=phases.shrink(spec.base, spec.tuning))
    own = table_path == TABLE
    table = Table(table_path, spec.space, None, EARLY_TABLE if own else None, LOSS_TABLE if own else None)
    target = study_target(spec)
    _, _, cost, _, _ = baseline_marks(table, target, 1)
    sur = {"full": surrogates(table, [], False)["full"]}
    world = World(spec.space, table, sur, target, {}, budget_runs * cost, spec.base, product_settle(spec))
    return Task(
        world, list(spec.warm_start), cost, f"{table_path.name} ({study_path.name}{', phase 1' if phase1 else ''})"
    )


class VariantSearch(ReplaySearch):
    """The replay's search with a variant's sampler, target and warm starts; every finished full
    trial recorded (compute, run, origin)."""

    def __init__(self, v: Variant, seed: int, task: Task):
        rule = Rule("pred", eta=9) if v.pruner.get("name") == "moasha" else None
        super().__init__(Method(v.name, "tpe", rule, warm=True), seed, task.world)
        self.v, self.task = v, task
        self.study = optuna.create_study(directions=["minimize", "maximize"], sampler=make_sampler(v.sampler, seed))
        self.finished: list[tuple[float, Run, str]] = []

    def baseline(self) -> None:
        base = self.w.table.baseline[self.seed % len(self.w.table.baseline)]["full_run"]
        if self.v.target == "relative":
            self.target = base.final - WITHIN
        super().baseline()
        self.finished.append((self.spent, base, "baseline"))
        if self.v.warm:
            for label, cfg in self.task.recipes:
                self.warm_start(label, cfg)

    def warm_start(self, label: str, cfg) -> None:
        """A warm start trained as given (never pruned; its rung points recorded) and told."""
        self.study.enqueue_trial(self.w.space.encode(cfg))
        trial, key, x = self.ask()
        run = self.w.sur["full"](x, key)
        if self.m.rule:
            self.m.rule.play(run, self.target, self.pools, self.n, may_prune=False)
        self.n += 1
        self.spent += run.cost(N_GRID - 1, evals=run.evals(N_GRID - 1, self.target, self.w.settle))
        if not run.ok:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        h = run.ttt(self.target)
        set_constraints(trial, [shortfall(run.final, h is not None, self.target)])
        self.study.tell(trial, [h if h is not None else run.t[-1], run.final])
        self.finished.append((self.spent, run, label))

    def completed(self, run: Run, key, x, trial, row) -> None:
        super().completed(run, key, x, trial, row)
        if run.ok:
            self.finished.append((self.spent, run, "search"))


def recipe_speedup(task: Task, base: Run, seed: int) -> float:
    """The best recipe's speed-up within the point on this seed's baseline (1.0: none beats it)."""
    world, target = task.world, base.final - WITHIN
    best = 1.0
    for _, cfg in task.recipes:
        params = world.space.encode(cfg)
        run = world.sur["full"](world.table.encoder(params), json.dumps(params, sort_keys=True, default=str))
        sp = _speedup(base, run, target)
        best = max(best, sp or 0.0)
    return best


def _speedup(base: Run, run: Run, target: float) -> float | None:
    b, t = base.ttt(target), run.ttt(target)
    return b / t if b and t else None


def search(v: Variant, seed: int, task: Task) -> tuple[Search, dict]:
    """One variant on one seed: its events and counts."""
    t0 = time.process_time()
    s = VariantSearch(v, seed, task)
    counts = s.run()
    base = task.world.table.baseline[seed % len(task.world.table.baseline)]["full_run"]
    target = base.final - WITHIN
    events = [Event(spent / task.unit, _speedup(base, run, target), origin) for spent, run, origin in s.finished]
    counts["cpu_s"] = time.process_time() - t0
    return Search(events, recipe_speedup(task, base, seed)), counts
