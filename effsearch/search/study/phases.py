"""The tuning phase: search cheaply on a subset of the data, then confirm the best on all of it.

Phase 1 (``tune``) is the study ``NAME-tune``: every trial trains on a stratified
``data_fraction`` of the training images (the validation split stays the same,
so accuracies stay comparable) for ``epochs_fraction`` of its epochs, against
the phase's own ``target_accuracy``. Phase 2 (``confirm``) is the study ``NAME``
itself: the baseline plus the ``top_k`` phase-1 configurations by non-dominated
sorting (crowding breaks ties, so the picks spread along the front), each re-run
on the full data with ``seeds`` seeds. The final Pareto front is phase 2's.

The studies are linked by attributes: the tune study names its ``confirm_study``,
the confirm study its ``tune_study``; each confirm trial its ``tune_trial`` and
that trial's values, which is what the rank correlations are computed from.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from statistics import fmean
from typing import TYPE_CHECKING, Any

from optuna.trial import BaseTrial, FrozenTrial, TrialState

from effsearch.config import TrainConfig
from effsearch.config.options import Named, NoOptions, SubsetTuning
from effsearch.search.store import record
from effsearch.search.store.attrs import (
    BASELINE_KEY,
    CONFIG_HASH_KEY,
    CONFIRM_CONFIG_KEY,
    CONFIRM_SEED_KEY,
    CONFIRM_STUDY_KEY,
    COUNTED_FAIL,
    FAILED_SEEDS_KEY,
    FULL_CONFIG_KEY,
    PHASE_KEY,
    REACHED_KEY,
    SEED_TRIALS_KEY,
    SPEEDUP_KEY,
    STATUS_KEY,
    TEST_ACCURACY_KEY,
    TIME_TO_TARGET_KEY,
    TRAIN_SECONDS_KEY,
    TUNE_STUDY_KEY,
    TUNE_TRIAL_KEY,
    TUNE_VALUES_KEY,
    TUNING_KEY,
    VAL_ACCURACY_KEY,
    VAL_BPB_KEY,
    VAL_LOSS_KEY,
    WALL_KEY,
)
from effsearch.search.store.storage import CONSTRAINTS_KEY

if TYPE_CHECKING:
    import optuna

    from effsearch.search.study.spec import StudySpec

TUNE_SUFFIX = "-tune"


def enabled(spec: StudySpec) -> bool:
    return spec.tuning is not None


def tuning_of(spec: StudySpec) -> SubsetTuning:
    """The study's tuning options (a study with a tuning phase: ``enabled``)."""
    if spec.tuning is None:
        raise ValueError(f"study {spec.name!r} has no tuning phase")
    return spec.tuning


def shrink(cfg: TrainConfig, tuning: SubsetTuning) -> TrainConfig:
    """A phase-1 config: a subset of the training data, a share of the epochs (and of the
    validation split)."""
    changes: dict[str, Any] = {"dataset.data_fraction": cfg.dataset.data_fraction * tuning.data_fraction}
    if tuning.val_subset < 1:
        changes["dataset.val_subset"] = cfg.dataset.val_subset * tuning.val_subset
    if tuning.epochs_fraction < 1:
        epochs = cfg.epochs * tuning.epochs_fraction
        changes["epochs"] = max(1, round(epochs)) if float(cfg.epochs).is_integer() else epochs
    if tuning.target_accuracy is not None:
        changes["target_accuracy"] = tuning.target_accuracy
    return cfg.replace(**changes)


def stored_tuning(tuning: SubsetTuning) -> dict:
    """The tuning options as phase 2's study keeps them (``TUNING_KEY``), in the order studies
    written before have them: the options that are set, the name, then a phase-1 target."""
    knobs = Named("subset", tuning).knobs()
    target = knobs.pop("target_accuracy", None)
    return {**knobs, "name": "subset", **({"target_accuracy": target} if target is not None else {})}


def tune_spec(spec: StudySpec) -> StudySpec:
    """Phase 1's StudySpec: its own study in the same storage, pruner as the file says."""
    return dataclasses.replace(spec, name=spec.name + TUNE_SUFFIX, phase="tune")


def confirm_spec(spec: StudySpec, picks: int | None = None) -> StudySpec:
    """Phase 2's StudySpec: the study NAME itself, only queued trials, never pruned. ``picks``: how
    many configurations phase 1 gave (fewer than top_k when fewer completed; None: top_k). Its
    n_trials is what was queued: a slot more would be sampled, a configuration phase 1 never had."""
    t = tuning_of(spec)
    return dataclasses.replace(
        spec,
        phase="confirm",
        n_trials=1 + (t.top_k if picks is None else picks) * t.seeds,
        timeout=None,
        pruner=Named("none", NoOptions()),
        sampler=Named("random", NoOptions()),
    )


def picks_of(spec: StudySpec) -> int | None:
    """How many configurations a phase-2 spec confirms (``confirm_spec``'s ``picks``); None otherwise."""
    if spec.phase != "confirm" or spec.n_trials is None:
        return None
    return (spec.n_trials - 1) // tuning_of(spec).seeds


def phase_spec(spec: StudySpec, phase: str, picks: int | None = None) -> StudySpec:
    if phase == "confirm":
        return confirm_spec(spec, picks)
    return tune_spec(spec) if phase == "tune" else spec


def trial_config(spec: StudySpec, cfg: TrainConfig) -> TrainConfig:
    """What a trial of this phase trains, given the full-data config it sampled."""
    return shrink(cfg, tuning_of(spec)) if spec.phase == "tune" else cfg


# -- picking and queueing phase 2 -----------------------------------------------------


def minimised(values: Sequence[float], directions: Sequence[str]) -> tuple:
    return tuple(v if d == "minimize" else -v for v, d in zip(values, directions))


def top_k(trials: Sequence[FrozenTrial], directions: Sequence[str], k: int) -> list[FrozenTrial]:
    """The best ``k`` complete non-baseline trials of distinct configs: front by front, spread first."""
    from effsearch.search.pareto import rank

    pool = [
        t
        for t in trials
        if t.state == TrialState.COMPLETE and not t.user_attrs.get(BASELINE_KEY) and t.user_attrs.get(FULL_CONFIG_KEY)
    ]
    # Trials that reached the target first (a miss is infeasible), then misses by their shortfall.
    shortfall = [sum(max(0.0, c) for c in t.constraints.values()) for t in pool]
    feasible = [i for i in range(len(pool)) if shortfall[i] == 0]
    order = [feasible[i] for i in rank([minimised(pool[j].values, directions) for j in feasible])]
    order += sorted((i for i in range(len(pool)) if shortfall[i] > 0), key=lambda i: shortfall[i])
    # Distinct configurations only: a config trained twice (or a duplicate answered from storage)
    # would be confirmed twice; the next best takes its place.
    picked, seen = [], set()
    for i in order:
        key = pool[i].user_attrs.get(CONFIG_HASH_KEY) or pool[i].user_attrs[FULL_CONFIG_KEY]
        if key not in seen:
            seen.add(key)
            picked.append(pool[i])
    return picked[:k]


def queue_confirm(spec: StudySpec, tune_study: optuna.Study, study: optuna.Study) -> list[int]:
    """Enqueue phase 2 once (a rerun adds only what is missing); returns the tune trial numbers."""
    t = tuning_of(spec)
    picked = top_k(tune_study.get_trials(deepcopy=False), spec.directions, t.top_k)
    have = {
        (x.user_attrs.get(TUNE_TRIAL_KEY), x.user_attrs.get(CONFIRM_SEED_KEY))
        for x in study.get_trials(deepcopy=False)
        if x.state != TrialState.FAIL
    }
    # Cheapest first (phase 1's wall seconds): which configurations are picked does not change, but
    # when a --budget runs out in phase 2 it leaves the costliest unconfirmed, not the fast recipes
    # the study is for. A Fashion-MNIST study queued the accurate end of the front second: a GLISTER
    # recipe took 457 s on the full data, and the budget was gone before a 3.5x pick ran.
    for p in sorted(picked, key=lambda p: p.user_attrs.get(WALL_KEY) or 0.0):
        for s in range(t.seeds):
            seed = spec.base.seed + s
            if (p.number, seed) in have:
                continue
            study.enqueue_trial(
                dict(p.params),
                user_attrs={
                    TUNE_TRIAL_KEY: p.number,
                    TUNE_VALUES_KEY: list(p.values),
                    CONFIRM_SEED_KEY: seed,
                    CONFIRM_CONFIG_KEY: p.user_attrs[FULL_CONFIG_KEY],
                },
                skip_if_exists=False,
            )
    study.set_user_attr(PHASE_KEY, "confirm")
    study.set_user_attr(TUNE_STUDY_KEY, tune_study.study_name)
    study.set_user_attr(TUNING_KEY, stored_tuning(t))
    tune_study.set_user_attr(PHASE_KEY, "tune")
    tune_study.set_user_attr(CONFIRM_STUDY_KEY, study.study_name)
    return [p.number for p in picked]


def confirm_config(trial: BaseTrial) -> TrainConfig | None:
    """The config a queued phase-2 trial re-runs (the tune trial's, on full data, with its seed)."""
    cfg = record.stored_config(trial, CONFIRM_CONFIG_KEY)
    return None if cfg is None else cfg.replace(seed=trial.user_attrs[CONFIRM_SEED_KEY])


def seed_means(trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    """Phase 2's trials with a configuration confirmed with several seeds as one point. The
    COMPLETE trials of one ``tune_trial`` become a copy of the first: its values and recorded
    times and accuracies the means over the seeds, a hit only if every seed hit (constraints:
    the worst seed's), ``seed_trials`` naming them. A seed that failed for a reason of its own
    (diverged, an error; not a lost worker, whose trial is retried) makes the point a miss
    (``failed_seed_trials``). Every other trial passes through as it is.
    Why: a Fashion-MNIST study's fastest pick was within 1 point of the baseline's test accuracy in
    1 of 3 reruns (docs/results.md);
    the fastest of several seeds is a lucky draw, not the recipe a user trains."""
    import copy

    groups: dict[int, list] = {}
    failed: dict[int, list] = {}
    for t in trials:
        tune = t.user_attrs.get(TUNE_TRIAL_KEY)
        if tune is None:
            continue
        if t.state == TrialState.COMPLETE:
            groups.setdefault(tune, []).append(t)
        elif t.state == TrialState.FAIL and t.user_attrs.get(STATUS_KEY) in COUNTED_FAIL:
            failed.setdefault(tune, []).append(t.number)
    merged = {}
    for tune, ts in groups.items():
        bad = failed.get(tune, [])
        if len(ts) < 2 and not bad:
            continue
        ts = sorted(ts, key=lambda t: t.number)
        m = copy.deepcopy(ts[0])
        m.values = [fmean(t.values[i] for t in ts) for i in range(len(ts[0].values))]
        a = m.user_attrs
        hits = [t.user_attrs.get(REACHED_KEY) for t in ts]
        a[REACHED_KEY] = None if None in hits else all(hits)
        for key in (
            TIME_TO_TARGET_KEY,
            VAL_ACCURACY_KEY,
            VAL_LOSS_KEY,
            VAL_BPB_KEY,
            TEST_ACCURACY_KEY,
            TRAIN_SECONDS_KEY,
        ):
            xs = [t.user_attrs.get(key) for t in ts]
            a[key] = None if None in xs else fmean(xs)
        a.pop(SPEEDUP_KEY, None)  # the mean's is the baseline's time over the mean time (computed when read)
        a[SEED_TRIALS_KEY] = [t.number for t in ts]
        cs = [t.system_attrs.get(CONSTRAINTS_KEY) for t in ts]
        if all(cs):
            m.system_attrs[CONSTRAINTS_KEY] = [max(c[i] for c in cs) for i in range(len(cs[0]))]
        if bad:
            a[REACHED_KEY] = False
            a[FAILED_SEEDS_KEY] = bad
            m.system_attrs[CONSTRAINTS_KEY] = [max(c, 1.0) for c in m.system_attrs.get(CONSTRAINTS_KEY) or [0.0]]
        merged[ts[0].number] = m
        merged.update({t.number: None for t in ts[1:]})
    return [merged.get(t.number, t) for t in trials if merged.get(t.number, t) is not None]


# -- how well phase 1 predicted phase 2 -----------------------------------------------


def pairs(study: optuna.Study) -> list[tuple[list, list]]:
    """(phase-1 values, phase-2 values averaged over seeds) per confirmed configuration."""
    by_tune: dict[int, list] = {}
    tune_values = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        n = t.user_attrs.get(TUNE_TRIAL_KEY)
        if n is None:
            continue
        by_tune.setdefault(n, []).append(t.values)
        tune_values[n] = t.user_attrs[TUNE_VALUES_KEY]
    return [
        (tune_values[n], [sum(v[i] for v in vs) / len(vs) for i in range(len(vs[0]))])
        for n, vs in sorted(by_tune.items())
    ]


def correlation(study: optuna.Study, objectives: Sequence[str]) -> dict | None:
    """Kendall tau and Spearman rho of phase-1 vs phase-2 values, per objective (None before phase 2)."""
    from scipy.stats import kendalltau, spearmanr

    ps = pairs(study)
    if not ps:
        return None
    out: dict[str, Any] = {"n": len(ps)}
    for i, name in enumerate(objectives):
        a, b = [p[0][i] for p in ps], [p[1][i] for p in ps]
        if len(ps) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
            out[name] = {"kendall_tau": None, "spearman_rho": None}
            continue
        tau, rho = kendalltau(a, b).statistic, spearmanr(a, b).statistic
        out[name] = {"kendall_tau": _num(tau), "spearman_rho": _num(rho)}
    return out


def _num(x: Any) -> float | None:
    x = float(x)
    return round(x, 4) if math.isfinite(x) else None


def describe(study: optuna.Study, objectives: Sequence[str]) -> str | None:
    """Lines for `effsearch status`: the tune study and how well it predicted this one."""
    tune = study.user_attrs.get(TUNE_STUDY_KEY)
    if not tune:
        return None
    corr = correlation(study, objectives)
    lines = [f"phase 2 (confirm) of a tuning phase; phase 1 is study {tune!r} (effsearch status {tune} ...)"]
    if not corr:
        return "\n".join(lines + ["  no confirmed configuration yet"])
    lines.append(f"  how phase 1 predicted phase 2, over {corr['n']} configurations:")
    for name in objectives:
        c = corr[name]

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:+.2f}"

        lines.append(f"    {name:18s} Kendall tau {fmt(c['kendall_tau'])}  Spearman rho {fmt(c['spearman_rho'])}")
    if any(corr[n]["kendall_tau"] is None for n in objectives):
        lines.append("    (-: a rank correlation needs 3 configurations or more, with values that differ)")
    return "\n".join(lines)


def summary(spec: StudySpec) -> str:
    t = tuning_of(spec)
    name = spec.name.removesuffix(TUNE_SUFFIX) if spec.phase == "tune" else spec.name
    target = f", target {t.target_accuracy:g}" if t.target_accuracy is not None else ""
    val = f", {t.val_subset:g} of the validation split" if t.val_subset < 1 else ""
    return (
        f"phase 1 ({name}{TUNE_SUFFIX}): {spec.n_trials} trials on {t.data_fraction:g} of the data, "
        f"{t.epochs_fraction:g} of the epochs{val}{target}; phase 2 ({name}): baseline + top "
        f"{t.top_k} x {t.seeds} seed(s) on the full data"
    )
