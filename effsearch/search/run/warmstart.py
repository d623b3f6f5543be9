"""Warm starts: configurations queued right after the baseline and trained exactly as given.

They come from the study file's ``warm_start:`` recipes (dotted overrides of base, as
``baseline:``) and from ``effsearch run --warm-start``: the Pareto front of an earlier study,
or a training config file (a pick exported by ``effsearch best``). Each queued trial carries its config (``warm_config``) and where it came from
(``warm_start``); its parameters are recorded as far as the space can express them, as
the baseline's are. A config already queued is not queued again, so a resumed study adds nothing.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
import yaml

from effsearch.config import ConfigError, TrainConfig
from effsearch.config.fields import load_yaml, read_text
from effsearch.search.store import record
from effsearch.search.store.attrs import FULL_CONFIG_KEY, WARM_CONFIG_KEY, WARM_KEY
from effsearch.search.store.storage import storage_errors, why

if TYPE_CHECKING:
    from optuna.trial import BaseTrial

    from effsearch.search.study.spec import StudySpec


def enqueue(spec: StudySpec, study: optuna.Study) -> list[str]:
    """Queue the spec's warm starts the study does not have yet; returns their labels."""
    have = {t.user_attrs.get(WARM_CONFIG_KEY) for t in study.get_trials(deepcopy=False)}
    queued = []
    for label, cfg in spec.warm_start:
        text = cfg.to_yaml()
        if text in have:
            continue
        study.enqueue_trial(
            spec.space.encode(cfg), user_attrs={WARM_KEY: label, WARM_CONFIG_KEY: text}, skip_if_exists=False
        )
        have.add(text)
        queued.append(label)
    return queued


def config_of(trial: BaseTrial) -> TrainConfig | None:
    """The config a queued warm-start trial trains (None for any other trial)."""
    return record.stored_config(trial, WARM_CONFIG_KEY)


def front_configs(study: optuna.Study) -> list[tuple[str, TrainConfig]]:
    """(label, the full-data config) of each trial on ``study``'s Pareto front. A storage that
    does not answer is a ConfigError naming --warm-start: queries.front would read it as no
    front, and the study would start with nothing queued and no word of why."""
    from effsearch.search.store import queries

    try:
        trials = study.get_trials(deepcopy=False)
        _ = study.directions  # queries.front reads them too: a storage that fails, fails here
    except storage_errors() as e:
        raise ConfigError(
            "--warm-start", f"cannot read the Pareto front of study {study.study_name!r}: {why(e)}"
        ) from None
    out = []
    for t in queries.front(study, trials):
        cfg = record.stored_config(t, FULL_CONFIG_KEY) or record.stored_config(t)
        if cfg is not None:
            out.append((f"{study.study_name} trial {t.number}", cfg))
    return out


YAML_SUFFIXES = (".yaml", ".yml")


def config_file(path: str) -> bool:
    """Whether ``path`` is a training config file (what ``effsearch best`` and ``train`` read),
    not a study file: a YAML mapping without a study's ``base``."""
    p = Path(path)
    if not p.is_file() or p.suffix not in YAML_SUFFIXES:
        return False
    try:
        raw = load_yaml(read_text(p))  # not UTF-8, keys twice, an alias bomb: a ConfigError naming the file
    except yaml.YAMLError:  # not YAML: let the study lookup say what is wrong
        return False
    except ConfigError as e:
        raise ConfigError("--warm-start", e.message, e.source or str(p)) from None
    return isinstance(raw, dict) and "base" not in raw and ("model" in raw or "dataset" in raw)


def names_a_file(earlier: str) -> bool:
    """Whether --warm-start's value is a file's path (a study or config file), not a study name."""
    return Path(earlier).suffix in YAML_SUFFIXES or os.sep in earlier


def with_front_of(spec: StudySpec, earlier: str) -> StudySpec:
    """``spec`` with ``earlier`` added to its warm starts: a training config file (an exported
    pick, trained as given), or the front of an earlier study (a study file, or a study name in
    the same storage). What cannot be read is a ConfigError naming --warm-start (exit code 2:
    nothing has run yet, as with a storage that cannot be opened)."""
    from effsearch.search.results.lookup import StudyNotFound, is_storage, open_study
    from effsearch.search.study.studyfile import study_path

    if config_file(earlier):
        cfg = TrainConfig.from_yaml(earlier)
        return dataclasses.replace(spec, warm_start=list(spec.warm_start) + [_measured_alike(spec, earlier, cfg)])
    if study_path(earlier) is None and names_a_file(earlier):
        raise ConfigError("--warm-start", f"no such file: {Path(earlier).expanduser().resolve()}")
    # A study file keeps its own storage, a storage file holds its study; a bare name is looked up in this study's.
    try:
        study, _ = open_study(earlier, None if study_path(earlier) or is_storage(earlier) else spec.storage)
    except ConfigError as e:
        raise ConfigError("--warm-start", f"{earlier}: {e.message}") from None
    except StudyNotFound as e:
        raise ConfigError("--warm-start", f"no study {earlier!r}: {e}") from None
    front = [_measured_alike(spec, label, cfg, earlier) for label, cfg in front_configs(study)]
    return dataclasses.replace(spec, warm_start=list(spec.warm_start) + front)


def _measured_alike(
    spec: StudySpec, label: str, cfg: TrainConfig, earlier: str | None = None
) -> tuple[str, TrainConfig]:
    """(label, cfg) when ``cfg`` is measured as the study's trials are (its target, validation and
    test data); else a ConfigError naming --warm-start and the field, as a study file's warm start
    gets: timed to another target or on another split, its speed-up would not compare."""
    from effsearch.config.fields import get_path
    from effsearch.search.study.studyfile import measured_change

    path = measured_change(spec.base, cfg, relative=spec.relative_target is not None)
    if path is None:
        return label, cfg
    said = f"{earlier}: {label}" if earlier is not None else label
    ours, theirs = get_path(spec.base.to_dict(), path), get_path(cfg.to_dict(), path)
    raise ConfigError(
        "--warm-start",
        f"{said}: {path} is {theirs!r}, and {spec.name!r} measures every trial with {ours!r} (its base): a "
        "warm start changes how a run trains, not what it is measured on. To carry how another task's "
        "study trained onto this base: warm_start: [study:NAME@STORAGE] in the study file",
    )


# What an earlier study's configuration carries over to another task: how it trains, not what it
# trains on (its data and model), where, with which seed, or towards which target.
NOT_CARRIED = ("dataset", "model", "device", "seed", "target_accuracy", "target", "eval_every", "distributed")


def with_earlier_studies(spec: StudySpec) -> StudySpec:
    """``spec`` with the front of each ``study:NAME@STORAGE`` in its ``warm_start`` added: each front
    trial's changes from that study's baseline (how it trains), applied to this study's base, as a
    recipe is. A change this base or machine cannot take skips that configuration with a note; a
    study that cannot be read is a ConfigError naming the entry."""
    from effsearch.search.study.studyfile import STUDY_PREFIX, earlier_study

    entries = [e for e in spec.raw.get("warm_start") or [] if isinstance(e, str) and e.startswith(STUDY_PREFIX)]
    added, notes = [], []
    for entry in entries:
        where = f"warm_start[{(spec.raw.get('warm_start') or []).index(entry)}]"
        name, storage = earlier_study(entry, where)
        for label, changes in _front_changes(name, _storage_path(spec, storage), where):
            try:
                cfg = _with_changes(spec.base, changes)
            except ConfigError as e:
                notes.append(f"{label} skipped: {e}")
                continue
            added.append((label, cfg))
    if not entries:
        return spec
    return dataclasses.replace(spec, warm_start=list(spec.warm_start) + added, notes=list(spec.notes) + notes)


def _storage_path(spec: StudySpec, storage: str) -> str:
    """A journal file named relative to the study file's folder; a URL as it is."""
    from effsearch.search.store.urls import is_rdb_url

    if is_rdb_url(storage) or spec.path is None or Path(storage).is_absolute():
        return storage
    return str(spec.path.resolve().parent / storage)


def _front_changes(name: str, storage: str, where: str) -> list[tuple[str, dict]]:
    """(label, dotted changes from its baseline) of each front trial of study ``name``."""
    from effsearch.search.store import queries
    from effsearch.search.store.storage import open_url

    if "://" not in storage and not Path(storage).is_file():
        raise ConfigError(where, f"no such storage: {storage}")
    unreadable: tuple[type[Exception], ...] = (KeyError, *storage_errors())  # KeyError: no such study there
    try:
        study = optuna.load_study(study_name=name, storage=open_url(storage))
        trials = study.get_trials(deepcopy=False)
    except unreadable as e:
        raise ConfigError(where, f"cannot read study {name!r} in {storage}: {why(e)}") from None
    base = queries.baseline_trial(trials)
    base_cfg = record.stored_config(base, FULL_CONFIG_KEY) or record.stored_config(base) if base else None
    if base_cfg is None:
        raise ConfigError(where, f"study {name!r} in {storage} has no completed baseline to read its changes from")
    out = []
    for t in queries.front(study, trials):
        cfg = record.stored_config(t, FULL_CONFIG_KEY) or record.stored_config(t)
        if cfg is not None and t is not base:
            changes = _changes(base_cfg.to_dict(), cfg.to_dict())
            if changes:
                out.append((f"{STUDY_LABEL}{name} trial {t.number}", changes))
    return out


STUDY_LABEL = "study:"


def _changes(base: dict, cfg: dict, prefix: str = "") -> dict:
    """The dotted keys whose values differ between two config dicts (left out: ``NOT_CARRIED``)."""
    out: dict = {}
    for key, value in cfg.items():
        dotted = f"{prefix}{key}"
        if dotted in NOT_CARRIED:
            continue
        if isinstance(value, dict) and isinstance(base.get(key), dict) and key != "algorithms":
            out.update(_changes(base[key], value, dotted + "."))
        elif base.get(key) != value:
            out[dotted] = value
    return out


def _with_changes(base: TrainConfig, changes: dict) -> TrainConfig:
    from effsearch.config.fields import set_path
    from effsearch.config.machine import check_runnable

    data = base.to_dict()
    for key, value in changes.items():
        set_path(data, key, value)
    cfg = TrainConfig.from_dict(data)
    check_runnable(cfg)
    return cfg
