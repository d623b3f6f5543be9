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
    from effsearch.search.results.lookup import StudyNotFound, open_study
    from effsearch.search.study.studyfile import study_path

    if config_file(earlier):
        cfg = TrainConfig.from_yaml(earlier)
        return dataclasses.replace(spec, warm_start=list(spec.warm_start) + [(earlier, cfg)])
    if study_path(earlier) is None and names_a_file(earlier):
        raise ConfigError("--warm-start", f"no such file: {Path(earlier).expanduser().resolve()}")
    # A study file keeps its own storage; a bare name is looked up in this study's.
    try:
        study, _ = open_study(earlier, None if study_path(earlier) else spec.storage)
    except ConfigError as e:
        raise ConfigError("--warm-start", f"{earlier}: {e.message}") from None
    except StudyNotFound as e:
        raise ConfigError("--warm-start", f"no study {earlier!r}: {e}") from None
    return dataclasses.replace(spec, warm_start=list(spec.warm_start) + front_configs(study))
