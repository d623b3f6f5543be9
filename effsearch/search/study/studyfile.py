"""Study files (``studies/*.yaml``): what to search, how, and where to keep it.

Every key is checked before anything is written: an error names the file, the
field and what is allowed (exit code 2 in the CLI). Keys::

    name: quickstart            # Optuna study name (default: the file's stem)
    storage: null               # default: NAME.journal next to this file (no server);
                                # or sqlite:///x.db, postgresql://user@host/db, PATH.journal
    artifacts: null             # plots and configs per trial (default: beside the journal file,
                                # or STEM.artifacts/ beside this file for an RDB storage)
    base: {...}                 # the TrainConfig every trial starts from (or a path to one)
    baseline: {}                # dotted overrides of base: trial 0, the yardstick for speed-ups
    warm_start: []              # configs, each dotted overrides of base (as baseline), or a named
                                # recipe (recipe:one-cycle; `recipes`: all): queued after the
                                # baseline, trained exactly as given, once
    objectives: [time_to_accuracy, final_accuracy]
    space: {...}                # see effsearch.spaces.space
    sampler: tpe                # or {name: nsga2, population_size: 20}; tpe nsga2 nsga3 gp random
    n_trials: 20                # the study's total, across reruns and workers
    timeout: null               # seconds per `effsearch run`: no new trial starts after it
    budget: null                # compute seconds for the whole study (across reruns, workers and
                                # both tuning phases): no new trial starts once its trials'
                                # summed wall seconds reach it (effsearch.search.run.budget)
    seed: 0
    workers: auto               # worker processes on this machine: one per GPU (its own
                                # CUDA_VISIBLE_DEVICES; distributed.processes k: one per k GPUs),
                                # 1 without GPUs
    share_devices: false        # true: more workers than free GPUs, each trial's time marked shared
    checkpoint_every: null      # seconds of training between a trial's checkpoints (artifacts);
                                # a trial re-queued after a lost worker resumes from its last one
    pruner: none                # or {name: moasha, clock: budget, eta: 9, min_trials: 2}
    tuning: none                # or {name: subset, data_fraction: 0.2, epochs_fraction: 1,
                                #     val_subset: 1, target_accuracy: T, top_k: 5, seeds: 2}
    heartbeat: {interval: 30, grace_period: 90, max_retry: 3}   # a dead worker's trial is retried
    failure_limit: 3            # stop (exit 1) when this many trials in a row fail with the same
                                # error (class and message); 0: never
    dedupe: true                # a config a complete trial already trained is answered from
                                # storage (duplicate_of), not trained again; false: re-train
    max_slowdown: 4             # stop a trial still short of the target after 4x the baseline's
                                # time to target in train seconds; null: never
    plugins: []                 # modules imported first, here and in every worker and rank

A study file that names code (an import path in model.name or dataset.name, a plugin) runs
that code: treat it as you would a Python script. Modules are found on the Python path, in
the current folder and in the study file's folder.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import yaml

from effsearch import objectives as O
from effsearch.config import ConfigError, TrainConfig, options, read_yaml, targets
from effsearch.config.fields import SEED_MAX, fmt, get_path, quote, set_path
from effsearch.config.imports import add_search_path, import_plugins
from effsearch.config.machine import Machine, cpu_cores, free_workers, gpus_in_sight, visible_ids
from effsearch.config.metrics import ACCURACY, target_of
from effsearch.config.options import StudyNumbers, SubsetTuning, check_budget, check_heartbeat, check_tuning
from effsearch.config.sources import model_kind
from effsearch.search.pruners import check_pruner
from effsearch.search.store.urls import artifact_dir, as_url, file_storage
from effsearch.search.study import recipes
from effsearch.search.study.samplers import check_sampler
from effsearch.search.study.spec import StudySpec

log = logging.getLogger(__name__)

# What an empty study file is told.
MINIMAL_STUDY = (
    "a minimal study file is `base: {dataset: {name: digits}}` (the TrainConfig every trial "
    "starts from; objectives, space, sampler and n_trials have defaults), e.g. studies/quickstart.yaml"
)

KEYS = (
    "name",
    "description",
    "storage",
    "artifacts",
    "base",
    "baseline",
    "warm_start",
    "objectives",
    "space",
    "sampler",
    "n_trials",
    "timeout",
    "budget",
    "seed",
    "workers",
    "share_devices",
    "checkpoint_every",
    "pruner",
    "tuning",
    "heartbeat",
    "failure_limit",
    "dedupe",
    "max_slowdown",
    "plugins",
)

# The keys that are not study numbers (StudyNumbers carries theirs on its fields), with their help:
# what `python -m effsearch.reference` writes into docs/fields.md.
KEY_HELP = {
    "name": "the Optuna study's name (default: the file's stem)",
    "description": "a line on what the study is for, kept in storage",
    "storage": "default: STEM.journal beside this file (STEM: its name less .yaml; no server); or sqlite:///x.db, "
    "postgresql://user@host/db, PATH.journal",
    "artifacts": "folder for plots and configs per trial (default: beside the journal file, or "
    "STEM.artifacts/ beside this file for an RDB storage)",
    "base": "the TrainConfig every trial starts from (a mapping, or a path to a YAML file)",
    "baseline": "dotted overrides of base: trial 0, the yardstick for speed-ups (default: base as is)",
    "warm_start": "configs queued after the baseline and trained exactly as given, once: dotted overrides "
    "of base, or a named recipe (recipe:NAME; recipes: all that fit; `effsearch recipes`)",
    "objectives": "what each trial is scored on (default: time_to_accuracy, final_accuracy)",
    "space": "what the sampler may change (include, exclude, ranges; `effsearch space show`)",
    "sampler": "tpe (default), local, nsga2, nsga3, gp or random, or a mapping {name: ..., option: value}",
    "pruner": "none (default) or moasha, or a mapping {name: moasha, option: value}",
    "tuning": "none (default) or subset: a cheap phase on a data subset before full runs",
    "heartbeat": "{interval, grace_period, max_retry}: a dead worker's trial is retried",
    "plugins": "modules imported first, here and in every worker and rank (runs their code)",
}


def load(
    path: str | Path,
    *,
    storage: str | None = None,
    n_trials: int | None = None,
    timeout: float | None = None,
    workers: int | str | None = None,
    budget: float | None = None,
    machine: Machine | None = None,
) -> StudySpec:
    """Read and check a study file; command-line values replace the file's."""
    path = Path(path)
    raw = read_yaml(path, MINIMAL_STUDY)
    return from_mapping(
        raw, path, storage=storage, n_trials=n_trials, timeout=timeout, workers=workers, budget=budget, machine=machine
    )


def from_mapping(
    raw: Any,
    path: str | Path,
    *,
    source: str | None = None,
    storage: str | None = None,
    n_trials: int | None = None,
    timeout: float | None = None,
    workers: int | str | None = None,
    budget: float | None = None,
    machine: Machine | None = None,
) -> StudySpec:
    """A study from its mapping, as if read from the file ``path`` (its folder holds the default
    storage and resolves a relative ``base`` path); ``source`` names it in messages (default: path)."""
    path = Path(path)
    source = source or str(path)
    if not isinstance(raw, dict):
        raise ConfigError("", f"a study must be a mapping; got {type(raw).__name__}", source)
    try:
        return _load(copy.deepcopy(raw), path, source, storage, n_trials, timeout, workers, budget, machine)
    except ConfigError as e:
        raise (e if e.source else e.with_source(source)) from None


def _load(
    raw: dict,
    path: Path,
    source: str,
    storage_flag: str | None,
    n_trials_flag: int | None,
    timeout_flag: float | None,
    workers_flag: int | str | None,
    budget_flag: float | None,
    machine: Machine | None,
) -> StudySpec:
    here = path.resolve().parent
    for key in raw:
        if key not in KEYS:
            raise ConfigError(str(key), f"unknown key; allowed keys in a study file: {', '.join(KEYS)}")
    _plugins(raw, here)  # first: the configs below may name what they bring
    # The file's own values first, then what needs torch (the machine, the models' probes) and
    # may import FFCV (the space, ~10 s): a typo in a number is answered in a fraction of a second.
    name = _text(raw, "name", path.stem, nonblank=True)
    O.check(raw.get("objectives", list(O.DEFAULT)))
    sampler = check_sampler(raw.get("sampler", "tpe"))
    pruner = check_pruner(raw.get("pruner", "none"))
    tuning = check_tuning(raw.get("tuning", "none"))
    numbers = _numbers(
        raw, machine, n_trials=n_trials_flag, timeout=timeout_flag, workers=workers_flag, budget=budget_flag
    )
    heartbeat = check_heartbeat(raw.get("heartbeat"))
    storage, storage_field, artifacts_dir = _where(raw, path, storage_flag, workers_flag, numbers["workers"])
    _text(raw, "description", "")
    base, baseline, warm_start, notes, machine, relative = _configs(raw, here, machine)
    _check_tuning(base, tuning)
    objectives = _objectives(raw, base, baseline, warm_start)
    from effsearch.spaces.space import Space

    space = Space.build(base, raw.get("space"), machine)
    per_trial = _devices_per_trial(machine, space, [("base", base), ("baseline", baseline), *warm_start])
    numbers["workers"] = _workers(numbers, machine, per_trial, "--workers" if workers_flag is not None else "workers")
    _check_sqlite(storage, numbers["workers"], workers_flag)
    return StudySpec(
        name=name,
        source=source,
        storage=storage,
        artifacts=artifacts_dir,
        base=base,
        baseline=baseline,
        objectives=objectives,
        space=space,
        sampler=sampler,
        pruner=pruner,
        tuning=tuning,
        heartbeat=heartbeat,
        **numbers,
        devices_per_trial=per_trial,
        warm_start=warm_start,
        relative_target=relative,
        raw=raw,
        path=path,
        storage_field=storage_field,
        notes=notes,
    )


def _text(raw: dict, key: str, default: str, nonblank: bool = False) -> str:
    """The study file's string ``key`` (``default`` when absent)."""
    text = raw.get(key, default)
    if not isinstance(text, str) or (nonblank and not text.strip()):
        raise ConfigError(key, f"must be a {'non-empty ' if nonblank else ''}string; got {quote(text)}")
    return text


def _where(
    raw: dict, path: Path, storage_flag: str | None, workers_flag: int | str | None, workers: int | None
) -> tuple[str, str, Path]:
    """Where the study lives: its storage, the field that named it, its artifact folder."""
    storage = _storage(storage_flag, raw.get("storage"), path)
    storage_field = "--storage" if storage_flag is not None else "storage"
    _check_sqlite(storage, workers, workers_flag)
    artifacts = raw.get("artifacts")
    if artifacts is not None and not isinstance(artifacts, str):
        raise ConfigError("artifacts", f"must be a folder path; got {quote(artifacts)}")
    artifacts_dir = artifact_dir(path, artifacts, storage)
    assert artifacts_dir is not None  # a study file's path gives a folder
    return storage, storage_field, artifacts_dir


def _check_sqlite(storage: str, workers: int | None, workers_flag: int | str | None) -> None:
    """Several workers on SQLite lock each other out (None: auto, checked once settled)."""
    if workers is not None and workers > 1 and storage.startswith("sqlite"):
        raise ConfigError(
            "--workers" if workers_flag is not None else "workers",
            f"{workers} workers on SQLite ({storage}) end in 'database is locked'; "
            "use the default journal file or PostgreSQL for several workers",
        )


def _plugins(raw: dict, here: Path) -> None:
    plugins = raw.get("plugins") or []
    if not isinstance(plugins, list):
        raise ConfigError("plugins", f"must be a list of module names; got {quote(plugins)}")
    add_search_path(here)
    import_plugins(plugins)


def _configs(raw: dict, here: Path, machine: Machine | None) -> tuple:
    """(base, baseline, warm starts, notes on skipped recipes, the machine), each checked."""
    base_raw, relative = _relative_target(raw.get("base", {}))
    if isinstance(base_raw, str):
        base_path = (here / base_raw) if not Path(base_raw).is_absolute() else Path(base_raw)
        base = TrainConfig.from_yaml(base_path)
    elif isinstance(base_raw, dict):
        base = _config(copy.deepcopy(base_raw), "base")
    else:
        raise ConfigError(
            "base", f"must be a TrainConfig mapping or a path to a TrainConfig YAML; got {quote(base_raw)}"
        )
    baseline = _recipe(base, raw.get("baseline", {}) or {}, "baseline")
    warm_raw = raw.get("warm_start") or []
    if not isinstance(warm_raw, list):
        raise ConfigError(
            "warm_start",
            "must be a list of configs (mappings of dotted keys, like baseline) or recipe "
            f"names (recipe:NAME, recipes); got {quote(warm_raw)}",
        )
    for i, r in enumerate(warm_raw):  # a recipe's name is checked now; the recipe, once the machine is known
        if recipes.is_recipe(r):
            recipes.names(r, f"warm_start[{i}]")
        elif isinstance(r, str) and r.startswith(STUDY_PREFIX):
            earlier_study(r, f"warm_start[{i}]")

    # The machine decides what the space may offer (imports torch unless given).
    if machine is None:
        from effsearch.config.machine import detect

        machine = detect(base.device)
    _check_runnable(base, "base")
    _check_runnable(baseline, "baseline")
    warm_start, notes = _warm_starts(base, warm_raw)
    # A model not built in is probed once (on the meta device), so that the space's gates and the
    # rules about structure (an algorithm the model cannot take) read what it is made of.
    for label, cfg in (("base", base), ("baseline", baseline)):
        _probe(cfg, label)
    return base, baseline, warm_start, notes, machine, relative


def _relative_target(base_raw: Any) -> tuple[Any, float | None]:
    """The base mapping with a relative target (``target_accuracy: {relative_to_baseline: OFFSET}``,
    or ``target: {metric: M, relative_to_baseline: OFFSET}``) taken out, and its offset (None: a
    number, or none). The base trains towards ``targets.unresolved`` of its metric until the
    baseline resolves it (effsearch/search/run/target.py)."""
    if not isinstance(base_raw, dict):
        return base_raw, None
    given, accuracy = base_raw.get("target"), base_raw.get("target_accuracy")
    if isinstance(given, dict) and targets.is_relative(given):
        metric, by = targets.read_target(given, "base.target")
        if targets.is_relative(accuracy):
            raise ConfigError(
                "base.target_accuracy",
                f"{quote(accuracy)} beside base.target {quote(given)}: two targets relative to the "
                "baseline; keep the one on the metric you time",
            )
        return {**base_raw, "target": {"metric": metric, "value": targets.unresolved(metric)}}, by
    if not isinstance(accuracy, dict):
        return base_raw, None
    rel = targets.read(accuracy, "base.target_accuracy")
    assert isinstance(rel, targets.RelativeTarget)  # a mapping reads as one
    if isinstance(given, dict) and given.get("value") is not None:
        raise ConfigError(
            "base.target_accuracy",
            f"a target relative to the baseline here is on val accuracy, and base.target gives "
            f"{quote(given)} on {quote(given.get('metric', ACCURACY))}: give one or the other (a relative "
            "target on another metric: base.target: {metric: M, relative_to_baseline: OFFSET})",
        )
    return {**base_raw, "target_accuracy": targets.UNRESOLVED}, rel.relative_to_baseline


def _objectives(raw: dict, base: TrainConfig, baseline: TrainConfig, warm_start: list) -> tuple[str, ...]:
    """The objectives, each measurable by every config the study trains as given. Without
    ``objectives``: time to target and the final value of the base's target metric."""
    target = target_of(base)
    default = list(O.DEFAULT) if target.metric == ACCURACY else ["time_to_target", f"final_{target.metric}"]
    objectives = O.check(raw.get("objectives", default))
    for i, objective in enumerate(objectives):
        if objective == "time_to_accuracy" and target.metric != ACCURACY:
            raise ConfigError(
                f"objectives[{i}]",
                f"time_to_accuracy times a val accuracy rising to its target, and the base's target is "
                f"{target.text()} (target.metric {target.metric}: lower is better); use time_to_target",
            )
        if objective in O.NEEDS:
            key, want = O.NEEDS[objective]
            for label, cfg in (("base", base), ("baseline", baseline), *warm_start):
                if getattr(cfg, key) != want:
                    raise ConfigError(
                        f"objectives[{i}]",
                        f"{objective} needs {key}: {want} in {label} (every trial "
                        f"must measure it); {label}.{key} is "
                        f"{quote(getattr(cfg, key))}",
                    )
    return objectives


def _numbers(raw: dict, machine: Machine | None, **flags: Any) -> dict:
    """The study numbers (StudySpec's fields of StudyNumbers' names): the command line's value
    when given (an error names its flag), else the file's, else StudyNumbers' default. ``workers``
    stays None for auto (``_workers`` settles it once the machine is known)."""

    def number(key: str) -> Any:
        given, where = (flags[key], "--" + key.replace("_", "-")) if flags.get(key) is not None else (None, key)
        value = given if given is not None else raw.get(key, getattr(StudyNumbers, key))
        if key == "workers" and isinstance(value, str):
            if value == "auto":
                return None
            raise ConfigError(where, f"must be an integer or auto; got {quote(value)}")
        return options.check_value(StudyNumbers, key, value, where)

    keys = ("n_trials", "timeout", "seed", "workers", "failure_limit", "dedupe", "max_slowdown")
    out = {key: number(key) for key in (*keys, "share_devices", "checkpoint_every")}
    out["budget"], out["budget_runs"] = (
        (number("budget"), None) if flags.get("budget") is not None else check_budget(raw.get("budget"))
    )
    if out["n_trials"] is None and out["timeout"] is None and out["budget"] is None and out["budget_runs"] is None:
        raise ConfigError("n_trials", "give n_trials, timeout or budget (or several), else the study never ends")
    _check_cores(out["workers"], machine, "--workers" if flags.get("workers") is not None else "workers")
    return out


def _check_cores(workers: int | None, machine: Machine | None, field_name: str) -> None:
    """Without GPUs, at most one worker per CPU core this process may use: each worker is a process
    with its own threads and data, so more only share the cores (and memory) the first ones had.
    Checked before the machine is detected (torch's import) when no GPU is in sight (``gpus_in_sight``
    reads no torch); with GPUs the bound is theirs (``_workers``, once the machine is known)."""
    gpus = machine.gpus if machine is not None else gpus_in_sight()
    cores = machine.cores if machine is not None else cpu_cores()
    if workers is not None and not gpus and workers > cores:
        raise ConfigError(
            field_name,
            f"must be at most {cores} here (one worker process per CPU core; this process may use {cores}); got {workers}",
        )


def _devices_per_trial(machine: Machine, space: Any, configs: list[tuple[str, TrainConfig]]) -> int:
    """The GPUs a trial may ask for (distributed.processes: the base's, the baseline's, the warm
    starts', the space's largest), each within the GPUs this machine shows."""
    asks = [(f"{label}.distributed.processes", cfg.distributed.processes) for label, cfg in configs]
    if "distributed.processes" in space.fixed:
        asks.append(("space.fixed.distributed.processes", space.fixed["distributed.processes"]))
    elif "distributed.processes" in space.active:
        dim = next(d for d in space.dims if d.name == "distributed.processes")
        asks.append(("space: distributed.processes", max(dim.choices)))
    if machine.gpus:
        for where, k in asks:
            if k > machine.gpus:
                raise ConfigError(
                    where,
                    f"asks for {k} GPUs a trial (one per process); this machine shows {machine.gpus}; "
                    f"give at most {machine.gpus}",
                )
    return max(k for _, k in asks)


def _workers(numbers: dict, machine: Machine, per_trial: int, field_name: str) -> int:
    """The study's workers on this machine. With GPUs: one per ``per_trial`` of them (auto), and
    no more unless ``share_devices`` (a trial timed on a GPU another trial uses measures both).
    Without: auto is one, and at most one per CPU core (each worker is a process with its own
    threads and data: more only share the cores the first ones had)."""
    workers = numbers["workers"]
    if not machine.gpus:
        _check_cores(workers, machine, field_name)
        return workers or 1
    free = free_workers(machine.gpus, per_trial)
    if workers is None:
        return max(1, free)
    if workers > free and not numbers["share_devices"]:
        each = f"{per_trial} GPUs" if per_trial > 1 else "one GPU"
        raise ConfigError(
            field_name,
            f"{workers} workers x {each} a trial need {workers * per_trial} GPUs; this machine shows "
            f"{machine.gpus} ({', '.join(visible_ids(machine.gpus))}): at most {free} (auto), or "
            "share_devices: true to run more on the same GPUs (every trial's time then marked shared)",
        )
    return workers


def _check_tuning(base: TrainConfig, tuning: SubsetTuning | None) -> None:
    """The tuning phase's options against the base: phase 2's seeds, phase 1's target."""
    _check_confirm_seeds(base, tuning)
    _check_tuning_target(base, tuning)


def _check_tuning_target(base: TrainConfig, tuning: SubsetTuning | None) -> None:
    """``tuning.target_accuracy`` is phase 1's val accuracy target: on a base timed to another metric
    (a loss) it would be ignored, or, with a target relative to the baseline, leave phase 1 timed to
    an unreachable stand-in."""
    if tuning is None or tuning.target_accuracy is None:
        return
    target = target_of(base)
    if target.metric != ACCURACY:
        raise ConfigError(
            "tuning.target_accuracy",
            f"is phase 1's target on val accuracy, and the base is timed to {target.m.label} "
            f"(base.target.metric {target.metric}); leave it out: phase 1 times the base's target",
        )


def _check_confirm_seeds(base: TrainConfig, tuning: SubsetTuning | None) -> None:
    """Phase 2 trains each pick with seeds base.seed + 0..seeds-1 (effsearch.search.study.phases): the
    last must be a seed too, or phase 2 fails after phase 1's whole search."""
    if tuning is None:
        return
    seeds = tuning.seeds
    if base.seed + seeds - 1 > SEED_MAX:
        raise ConfigError(
            "tuning.seeds",
            f"phase 2 trains each pick with seeds base.seed + 0..{seeds - 1}, past "
            f"{SEED_MAX} (the largest seed Composer, NumPy and Optuna take; base.seed "
            f"is {base.seed}); lower base.seed or tuning.seeds",
        )


def _recipe(base: TrainConfig, overrides: Any, prefix: str) -> TrainConfig:
    """``base`` with a mapping of dotted TrainConfig keys applied (the baseline, a warm start)."""
    if not isinstance(overrides, dict):
        raise ConfigError(
            prefix,
            "must be a mapping of dotted TrainConfig keys to values, applied to base "
            f"(e.g. {{algorithms: {{}}, optimizer.lr: 0.1}}); got {quote(overrides)}",
        )
    d = base.to_dict()
    for key, value in overrides.items():
        set_path(d, str(key), copy.deepcopy(value))
    cfg = _config(d, prefix)
    path = measured_change(base, cfg)
    if path is not None:
        raise ConfigError(
            f"{prefix}.{path}",
            f"changes what a trial is measured on ({fmt(get_path(base.to_dict(), path))} in base): every trial "
            "is timed to one target on one validation split, so its speed-ups compare; set it in base",
        )
    return cfg


def measured_change(base: TrainConfig, cfg: TrainConfig, relative: bool = False) -> str | None:
    """The first ``MEASURED`` field ``cfg`` sets otherwise than ``base`` (None: none). ``relative``:
    the study's target is resolved from its baseline and applied to every trial, so the target's
    value is not compared (its metric is)."""
    before, after = base.to_dict(), cfg.to_dict()
    for path in MEASURED:
        if relative and path in ("target_accuracy", "target.value"):
            continue
        if get_path(after, path) != get_path(before, path):
            return path
    return None


# The fields that say what a trial is measured on: its target and the data it is validated and tested
# on. A baseline or a warm start that changed one would be timed to another target (or on another
# split) than every other trial, and its speed-up and place on the front would be read against theirs.
MEASURED = (
    "target_accuracy",
    "target.metric",
    "target.value",
    "dataset.name",
    "dataset.path",
    "dataset.kwargs",
    "dataset.test_fraction",
    "dataset.val_fraction",
    "dataset.val_subset",
    "dataset.val_tokens",
    "dataset.split_seed",
    "dataset.split_column",
    "dataset.group_column",
    "dataset.label_column",
    "dataset.text_column",
    "dataset.image_column",
    "dataset.classes",
    "dataset.synthetic_size",
    "eval_every",
)


def _config(data: dict, prefix: str) -> TrainConfig:
    try:
        return TrainConfig.from_dict(data)
    except ConfigError as e:
        raise e.under(prefix) from None


def _check_runnable(cfg: TrainConfig, prefix: str) -> None:
    from effsearch.config.machine import check_runnable

    try:
        check_runnable(cfg)
    except ConfigError as e:
        raise e.under(prefix) from None


STUDY_PREFIX = "study:"  # warm_start: [study:NAME@STORAGE]: an earlier study's front (search/run/warmstart.py)


def earlier_study(entry: str, where: str) -> tuple[str, str]:
    """(name, storage) of a ``study:NAME@STORAGE`` warm start; a ConfigError naming ``where`` else."""
    name, at, storage = entry[len(STUDY_PREFIX) :].rpartition("@")
    if not at or not name or not storage:
        raise ConfigError(
            where,
            f"{quote(entry)}: write study:NAME@STORAGE (a study's name and its journal file or database URL, "
            "e.g. study:fashion-mnist@fashion-mnist.journal)",
        )
    return name, storage


def _warm_starts(base: TrainConfig, entries: list) -> tuple[list, list[str]]:
    """(label, config) of each warm start, in order, and notes on the recipes skipped. A recipe
    (``recipe:NAME``, ``recipes``) this base or machine cannot run is skipped with a note; a
    mapping of the user's own that cannot run is an error naming it."""
    out, notes, named = [], [], 0
    for i, entry in enumerate(entries):
        where = f"warm_start[{i}]"
        if isinstance(entry, str) and entry.startswith(STUDY_PREFIX):
            continue  # read when the study runs (search/run/warmstart.py: with_earlier_studies)
        if not recipes.is_recipe(entry):
            cfg = _recipe(base, entry, where)
            _check_runnable(cfg, where)
            _probe(cfg, where)
            out.append((where, cfg))
            continue
        for name in recipes.names(entry, where):
            label = f"{recipes.PREFIX}{name}"
            named += 1
            try:
                cfg = _recipe(base, recipes.RECIPES[name].changes(base), label)
                _check_runnable(cfg, label)
                _probe(cfg, label)
            except ConfigError as e:
                notes.append(f"{label} skipped: {e.message if e.field == label else e}")
                continue
            out.append((label, cfg))
    if named and len(notes) == named:  # asked for, and none will run: more than a header's note
        log.warning(
            f"warm_start: every recipe it names was skipped ({'; '.join(notes)}), so the study queues none of them"
        )
    return out, notes


def _probe(cfg: TrainConfig, prefix: str) -> None:
    """The model ``cfg`` names checked as ``effsearch train`` checks it, and its facts learnt for the
    space (whether it takes images of other sizes needs a forward on a batch shaped like the data);
    a built-in sized by model.kwargs, whether its weights fit the machine's memory."""
    if model_kind(cfg.model.name) == "builtin" and not cfg.model.kwargs:
        return
    from effsearch.trainer.probe import check_config

    try:
        check_config(cfg, unknown_shape=True)
    except ConfigError as e:
        raise e.under(prefix) from None


def _storage(flag: str | None, value: Any, path: Path) -> str:
    """An RDB URL, or the absolute path of a journal file."""
    if flag is not None:
        if not flag.strip():
            raise ConfigError("--storage", "is empty: give a journal file (NAME.journal) or a database URL")
        where, base_dir, text = "--storage", Path.cwd(), flag
    elif value is not None:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError("storage", f"must be a storage URL or a file path; got {quote(value)}")
        where, base_dir, text = "storage", path.resolve().parent, value
    else:
        return str(path.resolve().parent / f"{path.stem}.journal")
    url = as_url(text, where)
    if url is not None:
        return url
    p = Path(text).expanduser()
    return file_storage(p if p.is_absolute() else base_dir / p)


def dump(spec: StudySpec) -> str:
    """The study file as stored on the study (for `effsearch status` by name)."""
    return yaml.safe_dump(spec.raw, sort_keys=False)


def study_path(study: str) -> Path | None:
    """The study file ``study`` names: a path, or a name under studies/ (None: neither)."""
    path = Path(study)
    if path.is_file():
        return path
    named = Path("studies") / f"{study}.yaml"
    return named if named.is_file() else None


def locate(study: str, storage_flag: str | None = None) -> tuple[str, str]:
    """(study name, storage) from a study file or a name, without the full check (for `status`)."""
    path = study_path(study)
    if path is not None:
        raw = read_yaml(path, MINIMAL_STUDY)
        name = raw.get("name", path.stem)
        try:
            return str(name), _storage(storage_flag, raw.get("storage"), path)
        except ConfigError as e:
            raise e.with_source(str(path)) from None
    if storage_flag is None:
        raise ConfigError(
            "study",
            f"{quote(study)} is neither a study file nor a study name under studies/; "
            "give a study file, its storage (a .journal or .db file, a URL), or the name with --storage=STORAGE",
        )
    return study, _storage(storage_flag, None, Path("study.yaml"))
