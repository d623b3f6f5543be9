"""A study's search space: the default catalogue narrowed by the study file.

The ``space:`` section of a study file::

    space:
      include: [budget, optimizer, algorithms.mixup]   # groups or dimensions (default: every group but
                                                       # distributed, which starts processes; all: every group)
      exclude: [algorithms.sam]                        # taken out: the base config's value holds
      ranges:                                          # replace a range or the choices
        optimizer.lr: {low: 0.01, high: 0.4, log: true}
        batch_size: {choices: [32, 64, 128]}
      fixed:                                           # taken out, held at this value
        algorithms.label_smoothing: true

A fixed value applies wherever its condition holds (a fixed ``algorithms.mixup.alpha``
applies to the trials that switch mixup on). Everything is checked here, before
any storage is touched: unknown names, empty ranges, values a field does not
allow, and fixed values that cannot hold together or on this machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from effsearch.config import ConfigError, TrainConfig, rules
from effsearch.config.fields import fmt
from effsearch.config.machine import Machine
from effsearch.spaces.default import DEFAULT_GROUPS, GROUPS, catalogue
from effsearch.spaces.dims import Dim

if TYPE_CHECKING:
    from optuna.trial import BaseTrial

SECTION_KEYS = ("include", "exclude", "ranges", "fixed")


@dataclass
class Space:
    base: TrainConfig
    dims: list[Dim]  # every dimension, in sampling order (ranges already replaced)
    active: set[str]  # searched
    fixed: dict[str, Any] = field(default_factory=dict)
    machine: Machine = field(default_factory=Machine)

    # -- building and checking -------------------------------------------------
    @classmethod
    def build(
        cls, base: TrainConfig, section: Any, machine: Machine, source: str | None = None, prefix: str = "space"
    ) -> Space:
        try:
            return cls._build(base, section, machine, prefix)
        except ConfigError as e:
            raise (e.with_source(source) if source else e) from None

    @classmethod
    def _build(cls, base: TrainConfig, section: Any, machine: Machine, prefix: str) -> Space:
        section = {} if section is None else section
        if not isinstance(section, dict):
            raise ConfigError(prefix, f"must be a mapping with keys {', '.join(SECTION_KEYS)}; got {section!r}")
        for key in section:
            if key not in SECTION_KEYS:
                raise ConfigError(f"{prefix}.{key}", f"unknown key; allowed keys here: {', '.join(SECTION_KEYS)}")
        dims = catalogue(base, machine)
        by_name = {d.name: d for d in dims}
        chosen = _names(section, "include", list(DEFAULT_GROUPS), dims, by_name, prefix) - _names(
            section, "exclude", [], dims, by_name, prefix
        )
        explicit = _ranges(section, by_name, prefix)
        _refuse_model_bound(section, explicit, by_name, base, prefix)
        dims = [by_name[d.name] for d in dims]
        fixed = _fixed(section, by_name, explicit, prefix)
        active = {
            d.name
            for d in dims
            if d.name in chosen and d.name not in fixed and (d.name in explicit or not unavailable(d))
        }
        dims = _hold_base(as_searched(base, active), dims, active - explicit)
        space = cls(base, dims, active, dict(fixed), machine)
        possible = space._check_fixed(prefix, chosen)
        space._check_idle(section, explicit, possible, prefix)
        return space

    def _check_fixed(self, prefix: str, chosen: set[str]) -> set[str]:
        """Fixed values must be able to hold, together and with the base config, on this machine.

        A fixed value whose condition reads a searched dimension holds wherever the
        condition does (e.g. a fixed mixup alpha, with mixup itself searched); one
        whose condition can never hold is an error. Returns the searched dimensions some trial
        may sample, on this machine or on one that offers what this one cannot (a GPU study's
        compile_mode, read on a CPU): ``_check_idle`` reads them.
        """
        cfg = self.base.to_dict()
        possible: set[str] = set()  # parents come first
        for d in self.dims:
            ok = d.when is None or d.when(cfg)
            if d.name in self.fixed:
                value = self.fixed[d.name]
                if not ok and not (d.off is not None and value == d.off):
                    if any(p in self.active for p in d.parents):
                        continue
                    raise ConfigError(
                        f"{prefix}.fixed.{d.name}",
                        f"cannot be {fmt(value)} here: it needs {d.when_text or 'its parent on'}, "
                        "which the base config and the other fixed values rule out",
                    )
                d.apply(cfg, value)
                continue  # a fixed dimension is never sampled
            if not ok and d.off is not None:
                d.apply(cfg, d.off)
            searched = d.name in self.active or (d.name in chosen and unavailable(d) and not d.extra.get("model_bound"))
            if searched and (ok or any(p in possible for p in d.parents)):
                possible.add(d.name)
        try:
            TrainConfig.from_dict(cfg)
        except ConfigError as e:
            names = ", ".join(self.fixed) or "none"
            raise ConfigError(
                f"{prefix}.fixed", f"the base config with the fixed values ({names}) is not valid: {e}"
            ) from None
        return possible

    def _check_idle(self, section: dict, explicit: set[str], possible: set[str], prefix: str) -> None:
        """A range, or a dimension named alone in ``include``, that no trial would ever sample (not in
        ``possible``) is a mistake the study would otherwise make silently (a range on ``optimizer.lr``
        where every trial trains AdamW, whose lr is ``optimizer.lr@adamw``): refused, naming what would
        be sampled."""
        include = section.get("include")
        named = {
            item: f"{prefix}.include[{i}]"
            for i, item in enumerate(include if isinstance(include, list) else [])
            if isinstance(item, str) and item in {d.name for d in self.dims}
        }
        where = {**named, **{name: f"{prefix}.ranges.{name}" for name in explicit}}
        for d in self.dims:
            if d.name not in where:
                continue
            if d.name not in self.active:
                if d.name in self.fixed or (d.name not in explicit and unavailable(d)):
                    continue  # fixed, or n/a on this machine (as `space show` says)
                what = "has a range but is not searched" if d.name in explicit else "is not searched"
                why = (
                    f"{prefix}.exclude names it or its group ({d.group})"
                    if _named_in(section.get("exclude"), d)
                    else f"{prefix}.include names neither it nor its group ({d.group})"
                )
                fix = (
                    "include it or drop the range" if d.name in explicit else "name it in include or exclude, not both"
                )
                raise ConfigError(where[d.name], f"{what}: {why}; {fix}")
            if d.name not in possible:
                alike = [o.name for o in self.dims if o.path == d.path and o is not d and o.name in possible]
                hint = f"; {', '.join(alike)} sets {d.path} here" if alike else ""
                raise ConfigError(
                    where[d.name],
                    f"is never sampled: it needs {d.when_text or 'its parent on'}, which the base config "
                    f"and the fixed values rule out{hint}",
                )

    # -- sampling ----------------------------------------------------------------
    def sample(self, trial: BaseTrial) -> dict:
        """Suggest every active dimension whose condition holds; return the config dict."""
        cfg = self.base.to_dict()
        for d in self.dims:
            if d.when is not None and not d.when(cfg):
                if d.off is not None:
                    d.apply(cfg, d.off)
                continue
            if d.name in self.fixed:
                d.apply(cfg, self.fixed[d.name])
            elif d.name in self.active:
                d.apply(cfg, d.suggest(trial))
        return cfg

    def config(self, trial: BaseTrial) -> TrainConfig:
        return TrainConfig.from_dict(self.sample(trial), source=f"trial {trial.number}")

    def encode(self, cfg: TrainConfig) -> dict:
        """The parameters of the active dimensions that ``cfg`` holds (to enqueue a baseline).

        Values the space cannot express (outside a range, not among the choices) are
        left out: ``record`` then records none for them, so a queued trial's parameters are only
        ever what it trains.
        """
        data = as_searched(cfg, self.active)
        params = {}
        for d in self.dims:
            if d.name not in self.active or (d.when is not None and not d.when(data)):
                continue
            value = d.read(data)
            if value is not None and d.contains(value):
                params[d.name] = value
        return params

    def record(self, trial: BaseTrial, cfg: TrainConfig) -> None:
        """Record on ``trial``, queued with ``encode(cfg)`` and training ``cfg`` as given (the
        baseline, a warm start), exactly those parameters: Optuna hands a queued trial its queued
        values, and a dimension ``cfg`` cannot express is not suggested at all, where ``sample``
        would draw it at random and store a value the trial never trained with."""
        by_name = {d.name: d for d in self.dims}
        for name in self.encode(cfg):
            by_name[name].suggest(trial)

    # -- showing -----------------------------------------------------------------
    def rows(self, show_all: bool = True) -> list[dict]:
        out = []
        searched = as_searched(self.base, self.active)  # the base as the notes on searched rows read it
        for d in self.dims:
            if not show_all and d.name not in self.active and d.name not in self.fixed:
                continue
            if d.name in self.active:
                state, values = "search", d.describe()
            elif d.name in self.fixed:
                state, values = "fixed", fmt(self.fixed[d.name])
            elif unavailable(d):
                state, values = "n/a", cast(str, unavailable(d))
            else:
                state, values = "base", fmt(d.read(self.base.to_dict()))
            out.append(
                {
                    "dimension": d.name,
                    "group": d.group,
                    "state": state,
                    "values": values,
                    "note": _base_note(d, searched) + _dropped(d) if state == "search" else "",
                    "when": d.when_text,
                    "help": d.help,
                }
            )
        return out

    def table(self, show_all: bool = False) -> str:
        rows = self.rows(show_all)
        # An n/a row's values say why; they run long, so they come last and pad no other column,
        # and its condition (moot here) is left out, so that it pads none either.
        head = ["dimension", "group", "state", "when", "values"]
        cells = [[r[h] if h != "when" or r["state"] != "n/a" else "" for h in head] for r in rows]
        for r, row in zip(rows, cells):
            row[-1] += r["note"]
        return format_table(head, cells)


def _base_note(d: Dim, data: dict) -> str:
    """Where the base's own value (``data``, as searched) stands to a searched range: widened to
    hold it, or outside a study's own range (the baseline then records no value for it)."""
    if "holds_base" in d.extra:
        return f" (widened to hold the base's {fmt(d.extra['holds_base'])})"
    value = d.read(data) if d.when is None or d.when(data) else None
    if value is None or d.contains(value):
        return ""
    return f" (the base's {fmt(value)} lies outside: its baseline records no {d.name})"


def _dropped(d: Dim) -> str:
    """Which default choices the model or base ruled out, and why (selection.strategy's)."""
    why = d.extra.get("dropped")
    return f" ({why})" if why else ""


def unavailable(d: Dim) -> str | None:
    """Why this machine cannot search ``d`` (None: it can)."""
    why = d.extra.get("unavailable")
    return why() if callable(why) else why


def as_searched(cfg: TrainConfig, active: set[str]) -> dict:
    """``cfg`` as the space reads it: with the batch size searched, lr is the lr at batch 128."""
    data = cfg.to_dict()
    if "batch_size" in active and not cfg.optimizer.scale_lr_with_batch:
        data["optimizer"]["lr"] = cfg.optimizer.lr * 128 / cfg.batch_size
    return data


def _hold_base(data: dict, dims: list[Dim], widen: set[str]) -> list[Dim]:
    """The catalogue's ranges in ``widen`` stretched to hold the base's own value (``data``, as
    searched): the baseline trains it, and its trial must record what it trained for TPE to learn
    from it. A study's own range is kept as given, and a log range cannot reach 0 nor a stepped
    one an off-step value: those record none (``Space.record``)."""
    out = []
    for d in dims:
        value = d.read(data) if d.name in widen and (d.when is None or d.when(data)) else None
        if not _widens(d, value):
            out.append(d)
            continue
        assert d.low is not None and d.high is not None and value is not None  # checked by _widens
        low, high = min(d.low, value), max(d.high, value)
        out.append(d.with_range(low=low, high=high, extra={**d.extra, "holds_base": value}))
    return out


def _widens(d: Dim, value: Any) -> bool:
    """Whether number range ``d`` can be widened to hold ``value``, which it does not hold."""
    if d.kind == "cat" or isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if not math.isfinite(value) or d.contains(value) or d.step is not None:
        return False
    return not (d.log and value <= 0) and not (d.kind == "int" and not float(value).is_integer())


def _refuse_model_bound(
    section: dict, explicit: set[str], by_name: dict[str, Dim], base: TrainConfig, prefix: str
) -> None:
    """A dimension the base's model rules out (an image algorithm on a text model, ALiBi), named
    alone in ``include`` or given a range: refused with the reason, as a config asking for it is
    (a group that holds it leaves it out quietly, as `space show --all` says)."""
    include = section.get("include")
    named: list = include if isinstance(include, list) else []
    where = {name: f"{prefix}.ranges.{name}" for name in explicit}
    where.update({item: f"{prefix}.include[{i}]" for i, item in enumerate(named) if item in by_name})
    for name, at in where.items():
        d = by_name[name]
        if d.extra.get("model_bound") and unavailable(d):
            raise ConfigError(at, f"{name} cannot be searched for this model: {unavailable(d)}")
    for name in sorted(explicit):
        _refuse_model_bound_choices(by_name[name], base, f"{prefix}.ranges.{name}")


# The fields a rule may read for it to be about the model alone: no other range can lift it.
_MODEL_FIELDS = frozenset(("model.name", "model.kwargs"))


def _refuse_model_bound_choices(d: Dim, base: TrainConfig, at: str) -> None:
    """Each choice of a range, set on the base: a rule that reads the model alone and forbids it
    would fail every trial that samples it (glister-pb on a model with no final nn.Linear)."""
    model_rules = [r for r in rules.RULES if r.reads and set(r.reads) <= _MODEL_FIELDS]
    for choice in d.choices:
        cfg = base.to_dict()
        d.apply(cfg, choice)
        broken = [r for r in model_rules if r.broken(cfg)]
        if broken:
            raise ConfigError(
                at, f"choice {fmt(choice)} cannot be searched for this model: {broken[0].error(cfg).message}"
            )


def _unknown(name: str, by_name: dict[str, Dim]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(by_name), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown dimension {name!r}{hint} (all dimensions: `effsearch space show --all`)"


def _parse_range(d: Dim, rng: Any, where: str) -> Dim:
    """A new Dim with the study file's range or choices, checked against the field."""
    if isinstance(rng, list):
        rng = {"choices": rng} if d.kind == "cat" or len(rng) != 2 else {"low": rng[0], "high": rng[1]}
    if not isinstance(rng, dict):
        raise ConfigError(
            where, f"must be {{low: L, high: H[, log: true, step: S]}} or {{choices: [...]}}; got {rng!r}"
        )
    allowed = ("choices",) if d.kind == "cat" else ("low", "high", "log", "step", "choices")
    for key in rng:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}", f"unknown key; allowed for this dimension: {', '.join(allowed)}")
    if "choices" in rng:
        choices = rng["choices"]
        if not isinstance(choices, list) or not choices:
            what = (
                "empty range: give a non-empty list" if isinstance(choices, list) else f"must be a list ([{choices!r}])"
            )
            raise ConfigError(f"{where}.choices", f"{what}; got {choices!r}")
        if len(rng) > 1:
            raise ConfigError(where, "give either choices or low/high, not both")
        for i, c in enumerate(choices):
            d.check_value(c, f"{where}.choices[{i}]")
        if len({repr(c) for c in choices}) != len(choices):
            raise ConfigError(f"{where}.choices", f"lists a value twice: {choices!r}")
        return d.with_range(kind="cat", choices=tuple(choices), low=None, high=None, log=False, step=None)
    for key in ("low", "high"):
        if key not in rng:
            raise ConfigError(f"{where}.{key}", f"missing; a range needs low and high (current: {d.describe()})")
        d.check_value(rng[key], f"{where}.{key}")
    low, high = rng["low"], rng["high"]
    if not low < high:
        raise ConfigError(
            where, f"empty range: low ({low}) must be below high ({high}); to hold one value, put it under space.fixed"
        )
    log = rng.get("log", d.log if d.low is not None and d.low > 0 else False)
    if not isinstance(log, bool):
        raise ConfigError(f"{where}.log", f"must be true or false; got {log!r}")
    if log and low <= 0:
        raise ConfigError(f"{where}.low", f"must be > 0 on a log scale; got {low}")
    step = rng.get("step")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, (int, float)) or not 0 < step < float("inf"):
            raise ConfigError(f"{where}.step", f"must be a positive number; got {step!r}")
        if log:
            raise ConfigError(f"{where}.step", "cannot be combined with log: true")
    if d.kind == "int" and (int(low) != low or int(high) != high):
        raise ConfigError(where, f"must be integers for this dimension; got {low}, {high}")
    return d.with_range(low=low, high=high, log=log, step=step)


def format_table(head: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in head]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    # the last column is never padded: its rule as wide as most of its cells, not its longest
    last = sorted(len(r[-1]) for r in cells)[(len(cells) * 9) // 10 - (len(cells) >= 10)]
    lines.insert(1, "  ".join("-" * w for w in widths[:-1] + [max(last, len(head[-1]))]))
    return "\n".join(lines)


def _names(
    section: dict, key: str, default: list[str], dims: list[Dim], by_name: dict[str, Dim], prefix: str
) -> set[str]:
    """The dimensions ``section[key]`` names (groups and single dimensions; a switch brings its
    parameters)."""
    items = section.get(key, default)
    if items == "all" and key == "include":
        items = list(GROUPS)
    elif items is None and key == "include":
        items = list(DEFAULT_GROUPS)
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list):
        raise ConfigError(f"{prefix}.{key}", f"must be a list of groups or dimensions; got {items!r}")
    out = set()
    for i, item in enumerate(items):
        if item in GROUPS:
            out |= {d.name for d in dims if d.group == item}
        elif item in by_name:
            out.add(item)
            if item.startswith("algorithms.") and item.count(".") == 1:  # a switch brings its parameters
                out |= {d.name for d in dims if d.name.startswith(item + ".")}
        else:
            raise ConfigError(
                f"{prefix}.{key}[{i}]",
                f"unknown group or dimension {item!r}; groups: "
                f"{', '.join(GROUPS)}; dimensions: see `effsearch space show`",
            )
    return out


def _named_in(items: Any, d: Dim) -> bool:
    """Whether ``items`` (an include or exclude list) names ``d`` or its group."""
    items = [items] if isinstance(items, str) else items if isinstance(items, list) else []
    return d.name in items or d.group in items


def _ranges(section: dict, by_name: dict[str, Dim], prefix: str) -> set[str]:
    """Replace the dimensions ``section["ranges"]`` narrows in ``by_name``; their names."""
    ranges = section.get("ranges") or {}
    if not isinstance(ranges, dict):
        raise ConfigError(f"{prefix}.ranges", f"must be a mapping of dimension -> range; got {ranges!r}")
    explicit = set()
    for name, rng in ranges.items():
        where = f"{prefix}.ranges.{name}"
        if name not in by_name:
            raise ConfigError(where, _unknown(name, by_name))
        by_name[name] = _parse_range(by_name[name], rng, where)
        # the study's own range: what the defaults left out no longer applies
        by_name[name].extra = {k: v for k, v in by_name[name].extra.items() if k != "dropped"}
        explicit.add(name)
    return explicit


def _fixed(section: dict, by_name: dict[str, Dim], explicit: set[str], prefix: str) -> dict:
    """``section["fixed"]``, each value checked against its dimension and not also given a range."""
    fixed = section.get("fixed") or {}
    if not isinstance(fixed, dict):
        raise ConfigError(f"{prefix}.fixed", f"must be a mapping of dimension -> value; got {fixed!r}")
    for name, value in fixed.items():
        where = f"{prefix}.fixed.{name}"
        if name not in by_name:
            raise ConfigError(where, _unknown(name, by_name) + "; other TrainConfig fields are set in `base`")
        by_name[name].check_value(value, where)
        if name in explicit:
            raise ConfigError(where, f"is also given a range in {prefix}.ranges; fix it or search it, not both")
    return fixed
