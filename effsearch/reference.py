"""The field reference (docs/fields.md), written from the declarations themselves.

Every TrainConfig field and every study-file key, with its type, default, allowed values and
help, read from the ``spec(...)`` on each dataclass field (``effsearch.config``) and the study
file's key table (``effsearch.search.study.studyfile``). The committed page is this module's output
(tests/meta/test_reference.py fails when it is stale):

    python -m effsearch.reference > docs/fields.md
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from effsearch import objectives as O
from effsearch.config import TrainConfig, options, targets
from effsearch.config.fields import type_name
from effsearch.search.pruners import PRUNER_OPTIONS
from effsearch.search.study import studyfile
from effsearch.search.study.samplers import SAMPLER_OPTIONS


def _type(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    name = type_name(args[0] if args else tp)
    return f"{name} or null" if type(None) in typing.get_args(tp) else name


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value) if not isinstance(value, str) else value


def _num(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _allowed(meta: dict) -> str:
    if meta.get("choices"):
        return ", ".join(str(c) for c in meta["choices"])
    low, high = meta.get("low"), meta.get("high")
    if low is None and high is None:
        return "see help" if meta.get("check") else ""
    lo_open, hi_open = meta.get("low_open"), meta.get("high_open")
    if high is None:
        return f"{'>' if lo_open else '>='} {_num(low)}"
    if low is None:
        return f"{'<' if hi_open else '<='} {_num(high)}"
    return f"{'(' if lo_open else '['}{_num(low)}, {_num(high)}{')' if hi_open else ']'}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rows(cls: type, prefix: str = "") -> list[str]:
    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            rows += _rows(tp, f"{prefix}{f.name}.")
            continue
        meta = f.metadata
        rows.append(
            f"| `{prefix}{f.name}` | {_type(tp)} | `{_default(f)}` | {_cell(_allowed(meta))} | "
            f"{_cell(meta.get('help', ''))} |"
        )
    return rows


HEADER = ["| field | type | default | allowed | help |", "| --- | --- | --- | --- | --- |"]


def _named(title: str, key: str, table: dict[str, type]) -> list[str]:
    """One table per options class (names sharing a class share it), then those without options."""
    out = [f"### `{key}`: {title}", ""]
    by_class: dict[type, list[str]] = {}
    for name, cls in table.items():
        by_class.setdefault(cls, []).append(name)
    for cls, names in by_class.items():
        if dataclasses.fields(cls):
            out += [f"`{key}: {{name: {' or '.join(names)}, ...}}` takes:", "", *HEADER, *_rows(cls), ""]
    plain = [name for name, cls in table.items() if not dataclasses.fields(cls)]
    if plain:
        out += [f"No options: {', '.join(plain)}.", ""]
    return out


def render() -> str:
    """docs/fields.md's text."""
    numbers = {f.name for f in dataclasses.fields(options.StudyNumbers)}
    study = [f"| `{key}` | {_cell(studyfile.KEY_HELP[key])} |" for key in studyfile.KEYS if key not in numbers]
    lines = [
        "# Field reference",
        "",
        "Every field of a training config (`configs/*.yaml`, a study's `base`, `--set key=value`)",
        "and every key of a study file (`studies/*.yaml`). Written by `python -m effsearch.reference",
        "> docs/fields.md` from the declarations in `effsearch/config/` (a test fails when this page",
        "is stale). Values outside *allowed* are refused before any work, naming the field (exit 2);",
        "rules across fields (`effsearch/config/rules.py`, listed by `effsearch space show`) come on top.",
        "",
        "## Training config (TrainConfig)",
        "",
        *HEADER,
        *_rows(TrainConfig),
        "",
        "## Study file",
        "",
        "| key | what it holds |",
        "| --- | --- |",
        *study,
        "",
        "Study numbers (each also a flag of `effsearch run` where the flag exists):",
        "",
        *HEADER,
        *_rows(options.StudyNumbers),
        "",
        "`budget: {baseline_runs: N}` instead of seconds:",
        "",
        *HEADER,
        *_rows(options.BaselineRunsBudget, "budget."),
        "",
        "A study file's `base` may give its target relative to the baseline trial instead of a number",
        "(`target_accuracy: {relative_to_baseline: -0.01}`, or on any metric `target: {metric: val_loss,",
        "relative_to_baseline: -0.05}`; a training config on its own may not):",
        "",
        *HEADER,
        *_rows(targets.RelativeTarget, "base.target_accuracy."),
        *_rows(targets.RelativeTarget, "base.target."),
        "",
        f"Objectives: {', '.join(O.OBJECTIVES)}.",
        "",
        *_named("samplers", "sampler", SAMPLER_OPTIONS),
        *_named("pruners", "pruner", PRUNER_OPTIONS),
        *_named("tuning phases", "tuning", options.TUNING),
        "### `heartbeat`: lost trials",
        "",
        *HEADER,
        *_rows(options.Heartbeat),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
