"""A study file's options, declared as TrainConfig's fields are (``spec``) and checked by the
same coercion: the sampler's, the pruner's, the tuning phase's, the heartbeat and the
study's own numbers. Errors name the dotted field and what is allowed.

A named option (``sampler: tpe`` or ``{name: nsga2, population_size: 20}``) is checked
against the option dataclass of its name (the samplers' and pruners' registries say which:
``effsearch.search.study.samplers.SAMPLERS``, ``effsearch.search.pruners.PRUNERS``) and becomes
a ``Named``: the name and that dataclass, the defaults filled (they are what ``effsearch`` passes;
where it has no reason of its own they are the library's).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from effsearch.config.fields import SEED_MAX, ConfigError, coerce, quote, spec


@dataclass
class NoOptions:
    pass


Options = TypeVar("Options")


@dataclass(frozen=True)
class Named(Generic[Options]):
    """An option a study file names: ``name`` and its ``options``, the option dataclass of that
    name with the file's values and the defaults for the rest."""

    name: str
    options: Options

    def knobs(self) -> dict[str, Any]:
        """The options as a mapping, those that are None (left to their library) left out."""
        return {k: v for k, v in dataclasses.asdict(self.options).items() if v is not None}  # type: ignore[call-overload]


# -- samplers (Optuna's; effsearch.search.study.samplers) ----------------------------------------


@dataclass
class TPEOptions:
    # 5, not Optuna's 10: in the search-efficiency replay (40 seeds, docs/benchmarks.md) TPE reached
    # 0.9 of the table's front with 0.80x the compute at full fidelity and 0.92x under the pruner.
    n_startup_trials: int = spec(5, low=0, help="random trials before TPE models the history")
    multivariate: bool = spec(True, help="model the parameters jointly, not one at a time")
    group: bool = spec(True, help="split the conditional space into the subspaces that occur together")
    constant_liar: bool = spec(True, help="several workers do not all sample the same point")
    n_ei_candidates: int = spec(24, low=1, help="candidates drawn per trial to pick the best by expected improvement")


@dataclass
class NSGAOptions:
    population_size: int = spec(50, low=2, help="trials a generation")
    mutation_prob: float | None = spec(
        None, low=0.0, high=1.0, help="per parameter (null: 1 / the number of parameters)"
    )
    crossover_prob: float = spec(0.9, low=0.0, high=1.0, help="chance a child is a crossover of two parents")
    swapping_prob: float = spec(
        0.5, low=0.0, high=1.0, help="uniform crossover: chance a parameter comes from the other parent"
    )


@dataclass
class GPOptions:
    n_startup_trials: int = spec(10, low=0, help="random trials before the Gaussian process models the history")


@dataclass
class LocalOptions:
    # effsearch/search/study/local.py: a few changes at a time from a tournament-picked completed trial.
    changes: float = spec(1.0, low=0, help="changes a trial makes beyond the first, on average (geometric)")
    tournament: int = spec(3, low=1, help="completed trials drawn at random for each parent; the best of them wins")
    step: float = spec(
        0.15, low=0, low_open=True, help="a changed number's step near the parent's value, as a share of its range"
    )


# -- pruners -----------------------------------------------------------------------------------


@dataclass
class MOASHAOptions:
    # 9, not 3: with min_fraction 1/9 that is one rung, keeping the best ninth there. A second cut at
    # 1/3 among the survivors stopped more of the recipes that make the front than it let finish
    # (search-efficiency replay, 40 seeds: median compute to the level 82 s against 116 s, mean 100
    # against 160, 90th percentile 185 against 360; docs/benchmarks.md).
    eta: float = spec(
        9.0, low=1.0, low_open=True, help="keep the best 1/eta at each rung; rungs at min_fraction * eta**k"
    )
    min_fraction: float = spec(
        1 / 9, low=0, high=1, low_open=True, high_open=True, help="the first rung, as a fraction of the epoch budget"
    )
    # 2, not 4: every study records the baseline at the rungs, and a trial it beats there need not
    # wait for two more peers (search-efficiency replay, 40 seeds: compute to the level 0.45/0.54x
    # against 0.53/0.59x of TPE at full fidelity, docs/benchmarks.md).
    min_trials: int = spec(2, low=1, help="trials seen at a rung (the baseline counts) before it prunes")
    rank: str = spec(
        "predicted",
        choices=["predicted", "spent"],
        help="time objective at a budget rung: time to target predicted from the curve so far "
        "(ties by accuracy), or the seconds spent so far (ties by crowding)",
    )
    # "budget", not "time": ranked on accuracy at one early second, the time rung keeps the trials
    # that learn fastest at first and prunes the accurate end of the front. On the Fashion-MNIST
    # study (docs/results.md, earlier studies) it found nothing and 2.75x within a point of the
    # baseline's accuracy, where the budget rung found 3.83x on the same product (3.2x and 4.1x
    # before); on the digits replay it saved 4-6% of median compute, inside seed noise.
    clock: str = spec(
        "budget",
        choices=["time", "budget"],
        help="time: one rung at time_fraction x the baseline's time to target (train "
        "seconds), ranked on accuracy there; budget: rungs at min_fraction * eta**k "
        "of each trial's epochs (also used until the baseline has a time to target)",
    )
    time_fraction: float = spec(
        0.15,
        low=0,
        high=1,
        low_open=True,
        high_open=True,
        help="clock time: the rung, as a share of the baseline's time to target",
    )


# -- the tuning phase (effsearch.search.study.phases) ------------------------------------------------


@dataclass
class SubsetTuning:
    # Phase 1 runs the study's n_trials; phase 2 runs the baseline plus top_k * seeds.
    data_fraction: float = spec(0.2, low=0, high=1, low_open=True, help="share of the training data in phase 1")
    epochs_fraction: float = spec(1.0, low=0, high=1, low_open=True, help="share of the epochs in phase 1")
    val_subset: float = spec(
        1.0,
        low=0,
        high=1,
        low_open=True,
        help="share of the validation split evaluated in phase 1 (its evaluations cost "
        "as much as its training when the split is large and the training subset small)",
    )
    target_accuracy: float | None = spec(
        None,
        low=0,
        high=1,
        low_open=True,
        help="phase 1's target on val accuracy (default: the base config's; refused where the base's "
        "target is on another metric)",
    )
    top_k: int = spec(5, low=1, help="phase-1 configurations confirmed on the full data")
    # 2, not 1: one seed's time to target is a draw. A K-FAC pick of a Fashion-MNIST study reached the
    # target at 15.4 s with one seed and 7.0 s with the other (1.5x or 3.3x the baseline); phase 2
    # judges a configuration on the mean (phases.seed_means; docs/results.md). Costs phase 2 twice its picks.
    seeds: int = spec(2, low=1, help="seeds each confirmed configuration is run with (judged on their mean)")


TUNING: dict[str, type] = {"none": NoOptions, "subset": SubsetTuning}


def check_tuning(value: Any, field_name: str = "tuning") -> SubsetTuning | None:
    """The study file's ``tuning``, checked, defaults filled; None: no tuning phase (``none``)."""
    named = check_named(value, field_name, TUNING)
    return None if named.name == "none" else named.options


# -- the study's own ----------------------------------------------------------------------------


@dataclass
class Heartbeat:
    interval: int = spec(30, low=1, help="seconds between a worker's heartbeats")
    grace_period: int | None = spec(
        None, low=1, help="seconds without one before a trial is lost (default 3 x interval; at least interval)"
    )
    max_retry: int = spec(3, low=0, help="times a lost trial is queued again")


@dataclass
class StudyNumbers:
    n_trials: int | None = spec(20, low=1, help="the study's total, across reruns and workers")
    timeout: float | None = spec(None, low=0, low_open=True, help="seconds per `effsearch run`")
    budget: float | None = spec(
        None,
        low=0,
        low_open=True,
        help="compute seconds for the whole study: the summed wall seconds of its trials (or "
        "{baseline_runs: N}: N runs of its baseline trial)",
    )
    seed: int = spec(0, low=0, high=SEED_MAX, help="the samplers' seed (each trial's is derived from it)")
    workers: int | None = spec(
        None,
        low=1,
        help="worker processes on this machine; auto (null): one per GPU, or per distributed.processes "
        "GPUs, each pinned to its own (CUDA_VISIBLE_DEVICES); 1 on a machine without GPUs. At most one "
        "per GPU (share_devices: more), or per CPU core without GPUs",
    )
    share_devices: bool = spec(
        False,
        help="allow more workers than free GPUs: they share them, and every trial's time is marked "
        "as measured on a shared device (its record, `status`)",
    )
    # Off by default: a lost worker's trial of seconds costs seconds to train again, and a checkpoint
    # copies the model and optimizer off the device (docs/guide.md, "Several GPUs and several machines").
    checkpoint_every: float | None = spec(
        None,
        low=0,
        low_open=True,
        help="seconds of training between a trial's checkpoints (model, optimizer, algorithms, data "
        "order, RNG, clock) in the artifact store; a trial re-queued after its worker was lost "
        "resumes from its last one (null: none)",
    )
    failure_limit: int = spec(3, low=0, help="stop after this many same failures in a row (0: never)")
    dedupe: bool = spec(
        True,
        help="answer a config a complete trial already trained from storage "
        "(false: train it again, e.g. to measure seed noise)",
    )
    # 4: beyond what a user of a time-to-target search would pick, and rare where trials behave (3 of
    # 546 random quickstart configurations trained 3x the baseline's time to target); on a GPU one
    # compile trial took 208 s of a 240 s study, 30x the baseline (effsearch.search.pruners.slowstop.SlowStop).
    max_slowdown: float | None = spec(
        4.0,
        low=1,
        help="stop a trial still short of the target once it has trained "
        "this many times the baseline's time to target (null: never)",
    )


@dataclass
class BaselineRunsBudget:
    # The user's unit: "the search may cost 20 trainings of what I had" (search/results/cost.py
    # reports a study's compute in it too), whatever one training costs on this machine.
    baseline_runs: float = spec(
        20.0,
        low=0,
        low_open=True,
        help="compute for the whole study, in runs of its baseline trial (its wall seconds; with a "
        "tuning phase, phase 1's baseline scaled to the full data until phase 2's has run)",
    )


def check_budget(value: Any, field_name: str = "budget") -> tuple[float | None, float | None]:
    """(compute seconds, baseline runs): ``budget: 2400`` or ``budget: {baseline_runs: 20}``."""
    if isinstance(value, dict):
        runs = check_options(BaselineRunsBudget, value, field_name)
        if "baseline_runs" not in runs:
            raise ConfigError(f"{field_name}.baseline_runs", "missing; e.g. budget: {baseline_runs: 20}")
        return None, runs["baseline_runs"]
    return check_value(StudyNumbers, "budget", value, field_name), None


# -- checking -------------------------------------------------------------------------------------


def check_value(cls: type[Any], name: str, value: Any, where: str) -> Any:
    """``value`` checked (and coerced) as field ``name`` of the option dataclass ``cls``."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return coerce(typing.get_type_hints(cls)[name], value, where, f.metadata)


def check_options(cls: type[Any], data: dict, prefix: str, owner: str = "") -> dict:
    """The options in ``data``, each checked against ``cls``; unknown keys are refused with what
    is allowed. Returns only the given options, coerced (``owner``: whose options, for messages)."""
    names = [f.name for f in dataclasses.fields(cls)]
    out = {}
    for key, value in data.items():
        if key not in names:
            allowed = ", ".join(names) or "none"
            raise ConfigError(
                f"{prefix}.{key}",
                f"not an option of {owner}; allowed: {allowed}" if owner else f"unknown key; allowed: {allowed}",
            )
        out[key] = check_value(cls, key, value, f"{prefix}.{key}")
    return out


def defaults(cls: type[Any]) -> dict:
    """The option dataclass's defaults, without the ones that are None (not passed on)."""
    return {k: v for k, v in dataclasses.asdict(cls()).items() if v is not None}


def check_named(value: Any, field_name: str, table: dict[str, type]) -> Named[Any]:
    """``name`` or ``{name: ..., option: value}``, checked against ``table`` (name -> its option
    dataclass); the options the mapping does not give are that dataclass's defaults."""
    if isinstance(value, str) or value is None:
        value = {"name": value or "none"}
    if not isinstance(value, dict) or "name" not in value:
        raise ConfigError(field_name, f"must be one of {', '.join(table)} or a mapping with `name`; got {quote(value)}")
    name = value["name"]
    if name not in table:
        raise ConfigError(
            f"{field_name}.name" if len(value) > 1 else field_name,
            f"unknown {field_name} {quote(name)}; allowed: {', '.join(table)}",
        )
    options = check_options(table[name], {k: v for k, v in value.items() if k != "name"}, field_name, name)
    return Named(name, table[name](**options))


def check_heartbeat(value: Any, field_name: str = "heartbeat") -> Heartbeat:
    """The heartbeat mapping, defaults filled: grace_period is 3 x interval unless given, and at
    least the interval (a shorter grace would call every live worker dead)."""
    hb = value or {}
    if not isinstance(hb, dict):
        raise ConfigError(field_name, f"must be a mapping with interval, grace_period, max_retry; got {quote(hb)}")
    out = {**defaults(Heartbeat), **check_options(Heartbeat, hb, field_name)}
    if out.get("grace_period") is None:
        out["grace_period"] = 3 * out["interval"]
    if out["grace_period"] < out["interval"]:
        raise ConfigError(
            f"{field_name}.grace_period",
            f"must be >= {out['interval']:g} (heartbeat.interval); got {quote(out['grace_period'])}",
        )
    return Heartbeat(interval=out["interval"], grace_period=out["grace_period"], max_retry=out["max_retry"])
