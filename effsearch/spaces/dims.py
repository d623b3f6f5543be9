"""One searchable dimension: an Optuna distribution bound to a TrainConfig field.

Config values are handled as plain dicts (``TrainConfig.to_dict()``) while a
trial is being sampled; the finished dict goes through ``TrainConfig.from_dict``
once, so every rule of the config applies to every sampled trial. A dimension that switches
a subject on is ``gated`` on the rules about it (``effsearch.config.rules``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from effsearch.config import ConfigError, TrainConfig, rules
from effsearch.config.algorithms import ALGORITHMS, check_param
from effsearch.config.fields import check_field as check_field_of
from effsearch.config.fields import fmt, get_path, set_path

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.trial import BaseTrial

__all__ = ["Dim", "check_field", "fmt", "gated", "get_path", "set_path"]


@dataclass
class Dim:
    name: str  # the Optuna parameter name; keep it stable, the history is keyed on it
    group: str
    kind: str  # "float" | "int" | "cat"
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple = ()
    path: str = ""  # the TrainConfig field it sets (default: the name)
    when: Callable[[dict], bool] | None = None  # sampled only if this holds on the config so far
    when_text: str = ""
    parents: tuple = ()  # dimensions the condition reads (to tell "sometimes" from "never")
    off: Any = None  # applied when ``when`` fails (algorithm switches: off)
    help: str = ""
    to_config: Callable[[Any], Any] | None = None  # parameter -> config value
    from_config: Callable[[Any], Any] | None = None  # config value -> parameter (None: as is)
    setter: Callable[[dict, Any], None] | None = None  # custom write (switches)
    getter: Callable[[dict], Any] | None = None  # custom read
    machine_check: Callable[[Any], str | None] | None = None  # value -> why this machine cannot
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path = self.path or self.name
        self.choices = tuple(self.choices)
        self.parents = tuple(self.parents)

    # -- Optuna ---------------------------------------------------------------
    def distribution(self) -> BaseDistribution:
        import optuna.distributions as od

        if self.kind == "cat":
            return od.CategoricalDistribution(list(self.choices))
        assert self.low is not None and self.high is not None  # a number dimension has a range
        if self.kind == "int":
            return od.IntDistribution(int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        return od.FloatDistribution(float(self.low), float(self.high), log=self.log, step=self.step)

    def suggest(self, trial: BaseTrial) -> Any:
        if self.kind == "cat":
            return trial.suggest_categorical(self.name, list(self.choices))
        assert self.low is not None and self.high is not None  # a number dimension has a range
        if self.kind == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        return trial.suggest_float(self.name, float(self.low), float(self.high), log=self.log, step=self.step)

    def contains(self, value: Any) -> bool:
        if self.kind == "cat":
            return any(value == c and type(value) is type(c) for c in self.choices)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind == "int" and not float(value).is_integer():
            return False
        assert self.low is not None and self.high is not None  # a number dimension has a range
        return self.low <= value <= self.high

    # -- config ---------------------------------------------------------------
    def apply(self, cfg: dict, value: Any) -> None:
        if self.setter is not None:
            self.setter(cfg, value)
        else:
            set_path(cfg, self.path, self.to_config(value) if self.to_config else value)

    def read(self, cfg: dict) -> Any:
        """The parameter value that ``cfg`` holds (None if it cannot be expressed)."""
        value = self.getter(cfg) if self.getter is not None else get_path(cfg, self.path)
        if self.from_config is not None and value is not None:
            try:
                value = self.from_config(value)
            except (TypeError, ValueError):
                return None
        return value

    def check_value(self, value: Any, field_name: str) -> None:
        """Raise ConfigError (naming ``field_name``) if ``value`` is not allowed for the field."""
        if self.kind == "cat" and isinstance(value, (list, dict)):
            raise ConfigError(field_name, f"must be a single value; got {value!r}")
        if self.kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            if not (isinstance(value, float) and value.is_integer()):
                raise ConfigError(field_name, f"must be an integer; got {value!r}")
        if self.kind == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(field_name, f"must be a number; got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):  # NaN passes every range check
            raise ConfigError(field_name, f"must be a finite number; got {value!r}")
        if "algorithm" in self.extra:  # an algorithm's switch or parameter
            algo, param = self.extra["algorithm"], self.extra.get("param")
            if param is None:
                if not isinstance(value, bool):
                    raise ConfigError(field_name, f"must be true or false (switches {algo} on or off); got {value!r}")
            else:
                try:
                    check_param(
                        ALGORITHMS[algo],
                        f"algorithms.{algo}",
                        param,
                        self.to_config(value) if self.to_config else value,
                    )
                except ConfigError as e:
                    raise ConfigError(field_name, e.message) from None
        elif "check" in self.extra:  # a value no schema field declares (a model.kwargs switch)
            why = self.extra["check"](value)
            if why:
                raise ConfigError(field_name, why)
        elif self.setter is not None and self.choices and all(isinstance(c, bool) for c in self.choices):
            # A switch that writes another field (K-FAC names optimizer.name): its values are true and false.
            if not isinstance(value, bool):
                raise ConfigError(field_name, f"must be true or false; got {value!r}")
        elif self.setter is None or self.extra.get("field"):
            check_field(self.extra.get("field", self.path), value, field_name)
        elif not isinstance(value, bool):
            raise ConfigError(field_name, f"must be true or false; got {value!r}")
        if self.machine_check is not None:
            why = self.machine_check(value)
            if why:
                raise ConfigError(field_name, f"{value!r} is not possible here: {why}")

    def describe(self) -> str:
        if self.kind == "cat":
            return "{" + ", ".join(fmt(c) for c in self.choices) + "}"
        lo, hi = fmt(self.low), fmt(self.high)
        text = f"[{lo}, {hi}]"
        if self.kind == "int":
            text += " int"
        if self.log:
            text += " log"
        if self.step:
            text += f" step {fmt(self.step)}"
        if "unit" in self.extra:
            text += f", {self.extra['unit']}"
        return text

    def with_range(self, **changes: Any) -> Dim:
        d = copy.copy(self)
        for k, v in changes.items():
            setattr(d, k, v)
        d.choices = tuple(d.choices)
        return d


def check_field(path: str, value: Any, field_name: str) -> None:
    """Check ``value`` against the TrainConfig field at ``path`` (type, choices, bounds)."""
    check_field_of(TrainConfig, path, value, field_name)


def optimizer_switch(on: str, off: str) -> Callable[[dict, bool], None]:
    """The setter of a switch between two optimizers (K-FAC on SGD, Muon on AdamW): on names ``on``,
    off puts ``off`` back only where ``on`` was set (another optimizer sampled stays)."""

    def setter(cfg: dict, value: bool) -> None:
        if value:
            set_path(cfg, "optimizer.name", on)
        elif get_path(cfg, "optimizer.name") == on:
            set_path(cfg, "optimizer.name", off)

    return setter


def gated(
    subject: str, also: Callable[[dict], bool] | None = None, also_text: str = "", also_parents: tuple = ()
) -> dict:
    """``when``, ``when_text`` and ``parents`` of a dimension that switches ``subject`` on: it is
    sampled only where no rule about ``subject`` (``effsearch.config.rules``) forbids it, and
    ``also`` holds (a condition of the space's own, e.g. K-FAC as a switch on SGD)."""
    texts = [t for t in (also_text, rules.when_text(subject)) if t]
    if also is None and not rules.of(subject):
        return {}

    def when(cfg: dict) -> bool:
        return (also is None or also(cfg)) and not rules.blockers(subject, cfg)

    return {"when": when, "when_text": ", ".join(texts), "parents": tuple(also_parents) + rules.reads(subject)}
