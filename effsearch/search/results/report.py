"""A study as text: one line per trial, the status table, the best-recipe line, the baseline's warning.

The answers come from ``queries``; this module only words and lays them out. Only Optuna is
imported here, so `effsearch status` answers in a second or two.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, cast

from optuna.trial import TrialState

from effsearch.config import readers
from effsearch.config.choices import GPT, GPT_SWITCHES
from effsearch.config.metrics import ACCURACY, Target
from effsearch.objectives import FINAL_METRIC, TIME_OBJECTIVES
from effsearch.search.store import heartbeat, queries
from effsearch.search.store.attrs import (
    BASELINE_KEY,
    DUPLICATE_KEY,
    FAIL_REASON_KEY,
    PLACEMENT_KEY,
    REASON_KEY,
    RETRY_OF_KEY,
    SEED_TRIALS_KEY,
    STATUS_KEY,
    TEXT_KEY,
    WARM_KEY,
)
from effsearch.search.store.record import Recorded
from effsearch.spaces.space import format_table
from effsearch.trainer.result import speedup

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

ABBREV = {
    "time_to_accuracy": "tta",
    "time_to_target": "ttt",
    "final_accuracy": "acc",
    "final_val_loss": "loss",
    "final_val_bpb": "bpb",
    "train_time": "train",
    "model_size": "size",
    "quantized_size": "int8",
}


def target_words(target: Target) -> str:
    """``val loss <= 2.3 (lower is better)``: a target with its metric and direction."""
    return f"{target.text()} ({'higher' if target.m.higher else 'lower'} is better)"


def summary(cfg: dict, text: bool = False) -> str:
    """A config in a few words: what differs across trials (``text``: a run on token rows, where
    the config alone does not say so: an import path's model)."""
    o, s, sel, sp = cfg["optimizer"], cfg["schedule"], cfg["selection"], cfg["sparsity"]
    lr = o["lr"] * (cfg["batch_size"] / 128 if o.get("scale_lr_with_batch") else 1.0)
    parts = [f"{cfg['epochs']:.3g} ep", f"bs {cfg['batch_size']}", f"{o['name']} lr {lr:.3g}", s["name"]]
    parts += _shape_words(cfg, text)
    if sel["strategy"] != "full":
        parts.append(f"{sel['strategy']} {sel['fraction']:.2f}")
    if sp["target"] > 0:
        parts.append(f"sparsity {sp['target']:.2f}")
    if cfg.get("precision", "fp32") != "fp32":
        parts.append(cfg["precision"])
    if cfg.get("channels_last"):
        parts.append("channels_last")
    if cfg.get("compile"):
        parts.append("compile")
    if cfg.get("loader", "torch") != "torch":
        parts.append(cfg["loader"])
    algos = list(cfg.get("algorithms") or {})
    if algos:
        parts.append("+".join(algos))
    return ", ".join(parts)


def _shape_words(cfg: dict, text: bool = False) -> list[str]:
    """The model's size and switches and a text run's length and ramps, where a trial sets them
    (0 and a switch at its default: the model's own, not shown)."""
    m, d = cfg.get("model") or {}, cfg.get("dataset") or {}
    words = [f"{k} {m[k]}" for k in ("width", "depth") if m.get(k)]
    if m.get("name") == "text-encoder":
        words.append(f"{m.get('pooling', 'mean')} pooling")
    kwargs = m.get("kwargs") or {}
    for k in GPT_SWITCHES:  # a switch off its default: on, off, or its value (relu2)
        v = kwargs.get(k, GPT[k])
        if v != GPT[k]:
            words.append(k if v is True else f"{k} off" if v is False else str(v))
    if text or readers.text_run(cfg):
        words.append(f"len {d.get('max_length')}")
    words += [
        f"{label} {cfg[k]:.2g}"
        for k, label in (("batch_ramp", "bs ramp"), ("length_warmup", "len warmup"))
        if cfg.get(k)
    ]
    return words


def fmt_value(name: str, value: float | None, hit: bool = True) -> str:
    if value is None:
        return "-"
    if name in TIME_OBJECTIVES:
        return f"{value:.2f}" if hit else "miss"
    if name in ("model_size", "quantized_size"):
        return f"{value / 1024:.1f}K"
    if name in FINAL_METRIC:
        return f"{value:.4f}"
    return f"{value:.2f}"


def trial_line(
    trial: FrozenTrial,
    objectives: Sequence[str],
    trials: Sequence[FrozenTrial],
    study: optuna.Study,
    n_trials: int | None,
    elapsed: float | None = None,
    same_as: int | None = None,
) -> str:
    """One progress line for a finished trial, with the study's standing. ``same_as``: the trial
    whose line already printed this trial's error (a repeated error is printed once)."""
    c = queries.counts(trials)
    state = trial.user_attrs.get(STATUS_KEY) or trial.state.name.lower()
    if trial.state == TrialState.COMPLETE:
        hit = queries.reached(trial)
        vals = "  ".join(f"{ABBREV.get(n, n)} {fmt_value(n, v, hit)}" for n, v in zip(objectives, trial.values))
        base_tta = queries.seconds_to_target(queries.baseline_for(trials, trial))  # its kind of device
        sp = speedup(base_tta, queries.seconds_to_target(trial))
        what = vals + (f" ({sp:.2f}x)" if sp else "")
    elif same_as is not None:
        what = f"the same {'reason' if state == 'interrupted' else 'error'} as trial {same_as}"
    else:
        what = (trial.user_attrs.get(REASON_KEY) or trial.system_attrs.get(FAIL_REASON_KEY) or "")[:300]
    cfg = queries.config_of(trial)
    tag = (
        " baseline"
        if trial.user_attrs.get(BASELINE_KEY)
        else (f" ({trial.user_attrs[WARM_KEY]})" if WARM_KEY in trial.user_attrs else "")
    )
    if DUPLICATE_KEY in trial.user_attrs:  # answered from storage: say whose result it repeats
        state = f"duplicate of trial {trial.user_attrs[DUPLICATE_KEY]}, not trained"
    best = queries.best_tta(trials)
    total = f"{c['done']}/{n_trials}" if n_trials else f"{c['done']}"
    clock = f"[{elapsed:5.0f} s] " if elapsed is not None else ""
    return (
        f"{clock}trial {trial.number:>3}{tag} {state}: {what}"
        + (f"  [{summary(cfg, bool(trial.user_attrs.get(TEXT_KEY)))}]" if cfg else "")
        + f"\n  -> {total} done ({c['pruned']} pruned, {c['failed']} failed"
        + (f", {c['queued_again']} queued again" if c["queued_again"] else "")
        + "), "
        f"front {len(queries.front(study))}, best time to target "
        + (f"{best:.2f} s" if best is not None else "none yet")
    )


def recipe_line(trials: Iterable[FrozenTrial]) -> str | None:
    """Which recipe is the yardstick, for `status` and `run`."""
    r = queries.best_recipe(trials)
    if r is None:
        return None
    return (
        f"best known recipe: {r.user_attrs[WARM_KEY]} (trial {r.number}), "
        f"{Recorded.of(r).time_to_target:.2f} s to the target; 'x recipe' is each trial's speed-up over it"
    )


def status_table(study: optuna.Study, objectives: Sequence[str], show_all: bool = True) -> str:
    trials = study.get_trials(deepcopy=False)
    recipe = queries.best_recipe(trials)
    recipe_tta = queries.seconds_to_target(recipe)
    # a language model's trials record a test loss: shown in place of its next-token accuracy
    lm = any(Recorded.of(t).test_loss is not None for t in trials)
    head = (
        ["trial", "state"]
        + [_short(n) for n in objectives]
        + ["speed-up"]
        + (["x recipe"] if recipe else [])
        + ["test loss" if lm else "test acc", "train s", "config / reason"]
    )

    retried_as = {t.user_attrs[RETRY_OF_KEY]: t.number for t in trials if RETRY_OF_KEY in t.user_attrs}

    def row(t: FrozenTrial) -> list:  # each trial's speed-up over the baseline of its kind of device
        base_tta = queries.seconds_to_target(queries.baseline_for(trials, t))
        return table_row(t, objectives, base_tta, recipe, recipe_tta, test_loss=lm, retried_as=retried_as.get(t.number))

    c = queries.counts(trials)
    target = queries.study_target(study)
    shared = any(_shared(t) for t in trials)
    lines = [
        f"trials: {c['complete']} complete, {c['pruned']} pruned, {c['failed']} failed, "
        + (f"{c['queued_again']} queued again (interrupted or lost), " if c["queued_again"] else "")
        + (f"{c['not_run']} not run, " if c["not_run"] else "")
        + f"{c['running']} running, {c['waiting']} waiting  (* = baseline"
        + ("; ~ = timed on a shared GPU" if shared else "")
        + ")",
        *device_lines(trials),
    ] + ([f"target: {target_words(target)}"] if target is not None and target.metric != ACCURACY else [])
    if show_all and trials:
        lines += ["", format_table(head, [row(t) for t in trials])]
    pareto = queries.front(study)
    if recipe:
        lines += ["", cast(str, recipe_line(trials))]  # a str: there is a recipe
    lines += [
        "",
        f"Pareto front ({len(pareto)} trial{'s' if len(pareto) != 1 else ''}"
        + (
            "; a+b: the mean of trials a and b, one config's seeds"
            if any(t.user_attrs.get(SEED_TRIALS_KEY) for t in pareto)
            else ""
        )
        + "):",
    ]
    if pareto:
        lines.append(format_table(head, [row(t) for t in pareto]))
    elif c["complete"] and any(n in TIME_OBJECTIVES for n in objectives):
        lines.append(
            "  (no complete trial reached the target: a trial that misses it has no time to target "
            "and is not on the front)"
        )
    return "\n".join(lines)


def table_row(
    t: FrozenTrial,
    objectives: Sequence[str],
    base_tta: float | None,
    recipe: FrozenTrial | None,
    recipe_tta: float | None,
    test_loss: bool = False,
    retried_as: int | None = None,
) -> list:
    """One trial's row of the status table: its values, speed-ups over the baseline (and the
    best recipe, when there is one), test accuracy (``test_loss``: a language model's test loss),
    train seconds, and its config or why it failed (``retried_as``: the trial its parameters were
    queued again as)."""
    vals = list(t.values) if t.values else [None] * len(objectives)
    tta = queries.seconds_to_target(t)
    sp = speedup(base_tta, tta)
    over = [speedup(recipe_tta, tta)] if recipe else []
    cfg, text = queries.config_of(t), bool(t.user_attrs.get(TEXT_KEY))
    tail = (
        summary(cfg, text)
        if cfg and t.state == TrialState.COMPLETE
        else (
            t.user_attrs.get(REASON_KEY) or t.system_attrs.get(FAIL_REASON_KEY) or (summary(cfg, text) if cfg else "")
        )
    )
    exited = heartbeat.gone(t) if t.state == TrialState.RUNNING else None
    if exited:  # killed (SIGKILL, the OOM killer): still RUNNING in the storage until a run looks
        tail = f"{exited}: the next `effsearch run` of the study queues it again"
    if t.state == TrialState.WAITING:  # a warm start past n_trials, or a lost worker's trial queued again
        what = t.user_attrs.get(WARM_KEY)
        tail = f"queued{f' ({what})' if what else ''}, not run yet: the next run with trials to spare trains it first"
    if DUPLICATE_KEY in t.user_attrs:
        tail = f"= trial {t.user_attrs[DUPLICATE_KEY]} (not trained): {tail}"
    if retried_as is not None:  # its parameters went on as another trial: not a failure
        status = t.user_attrs.get(STATUS_KEY) or "lost"
        tail = (
            f"interrupted by Ctrl-C or SIGTERM, queued again as trial {retried_as}"
            if status == "interrupted"
            else f"{status}, queued again as trial {retried_as}: {tail}"
        )
    state = t.state.name
    if t.user_attrs.get(BASELINE_KEY):
        state += "*"
    if _shared(t):
        state += "~"
    r = Recorded.of(t)
    test, train = (r.test_loss if test_loss else r.test_accuracy), r.train_seconds
    seeds = t.user_attrs.get(SEED_TRIALS_KEY)  # a front point: the mean of these trials' seeds
    label = "+".join(map(str, seeds)) if seeds else t.number
    return (
        [label, state]
        + [fmt_value(n, v, queries.reached(t)) for n, v in zip(objectives, vals)]
        + [f"{x:.2f}x" if x else "-" for x in [sp, *over]]
        + [
            f"{test:.4f}" if test is not None else "-",
            f"{train:.1f}" if train is not None else "-",
            _clip(str(tail), 120),
        ]
    )


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _shared(trial: FrozenTrial) -> bool:
    return bool((trial.user_attrs.get(PLACEMENT_KEY) or {}).get("shared"))


def device_lines(trials: Sequence[FrozenTrial]) -> list[str]:
    """Where the trials trained, by kind of device and host (each GPU's trials), when any trained
    on a GPU or on several hosts; what a shared GPU means; a kind of device without a baseline."""
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for t in trials:
        p = t.user_attrs.get(PLACEMENT_KEY)
        if isinstance(p, dict):
            where = groups.setdefault((str(p.get("name")), str(p.get("host"))), {})
            where[str(p.get("index"))] = where.get(str(p.get("index")), 0) + 1
    if not groups or (len(groups) == 1 and all(i == "None" for g in groups.values() for i in g)):
        return []  # one CPU machine: nothing to tell apart
    parts = [
        f"{name} on {host}: "
        + ", ".join(f"{'GPU ' + i if i != 'None' else 'CPU'} {n} trial{'s' if n != 1 else ''}" for i, n in g.items())
        for (name, host), g in groups.items()
    ]
    lines = ["devices: " + "; ".join(parts)]
    shared = sum(_shared(t) for t in trials)
    if shared:
        lines.append(
            f"  {shared} trial{'s were' if shared != 1 else ' was'} timed on a GPU other workers trained on "
            "meanwhile (share_devices: true): those times measure the neighbours too"
        )
    kinds = {name for name, _ in groups}
    bare = sorted(k for k in kinds if queries.baseline_trial(trials, k) is None)
    if len(kinds) > 1 and bare:
        lines.append(
            f"  no baseline timed on {', '.join(bare)} yet: speed-ups of trials there read '-' "
            "(each kind of device is read against its own baseline)"
        )
    return lines


def baseline_warning(trials: Sequence[FrozenTrial], tune: bool = False) -> str | None:
    """Why speed-ups read '-': the baseline did not give a time to target (None when it did).
    ``tune``: phase 1 of a tuning phase, whose baseline trains on a subset of the data."""
    base = [t for t in trials if t.user_attrs.get(BASELINE_KEY)]
    if not base:
        return None
    done = [t for t in base if t.state == TrialState.COMPLETE]
    if done and Recorded.of(done[0]).time_to_target is not None:
        return None
    if done:
        t = done[0]
        r = Recorded.of(t)
        target = r.target
        final = r.final(target.metric) if target is not None else None
        why = (
            f"missed the target {target.value:g} (final {target.m.label} {final:.4f})"
            if target is not None and final is not None
            else "missed the target"
        )
    else:
        t = max(base, key=lambda x: x.number)
        if not t.state.is_finished():
            return None  # still to run
        why = t.user_attrs.get(STATUS_KEY) or t.state.name.lower()  # its reason is on its own line
    if tune and done:  # the full data's target, on a subset: fewer steps, a worse final value
        own = "tuning.target_accuracy, or " if target is None or target.metric == ACCURACY else ""
        return (
            f"phase 1's baseline (trial {t.number}, on the data subset) {why}: there is no yardstick, so "
            f"phase 1's speed-ups show '-'. Give phase 1 a target of its own ({own}a target relative to the baseline, `relative_to_baseline`, which each "
            "phase resolves from its own baseline) or more of the epochs (tuning.epochs_fraction)"
        )
    fix = (
        "Loosen the target (target_accuracy, or target.value) or give the baseline more epochs (the study "
        "file's base and baseline)"
        if done
        else "Its reason is on its line above; `effsearch train` of the study's base shows it whole"
    )
    return f"the baseline (trial {t.number}) {why}: there is no yardstick, so every speed-up shows '-'. {fix}"


def _short(name: str) -> str:
    return {
        "time_to_accuracy": "time to target s",
        "time_to_target": "time to target s",
        "final_accuracy": "val acc",
        "final_val_loss": "val loss (lower better)",
        "final_val_bpb": "val bpb (lower better)",
        "train_time": "train time s",
        "model_size": "size",
        "quantized_size": "int8 size",
    }.get(name, name)
