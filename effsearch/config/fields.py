"""Field machinery: constraints declared once on dataclass fields, one coercion, one dotted get/set.

Every options mapping a user writes (a TrainConfig, a study file's sampler, pruner,
tuning and heartbeat options) is a dataclass whose fields carry their allowed values
(``spec``); ``build`` turns a raw mapping into it and refuses what is not allowed with
a ``ConfigError`` naming the dotted field and what is allowed. Also here: the YAML
loader every reader of user YAML uses.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A config value that is wrong; ``str()`` names the source and the field."""

    def __init__(self, field_name: str, message: str, source: str | None = None):
        self.field = field_name
        self.message = message
        self.source = source
        super().__init__(self._text())

    def _text(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}{self.field}: {self.message}" if self.field else f"{where}{self.message}"

    def with_source(self, source: str) -> ConfigError:
        return ConfigError(self.field, self.message, source)

    def under(self, prefix: str) -> ConfigError:
        """The same error, its field under ``prefix`` (``base`` + ``optimizer.lr``: ``base.optimizer.lr``)."""
        return ConfigError(f"{prefix}.{self.field}" if self.field else prefix, self.message, self.source)


def spec(default: Any = dataclasses.MISSING, *, choices=None, low=None, high=None,
         low_open=False, high_open=False, factory=None, check=None, help: str = ""):
    """A dataclass field with its allowed values attached. ``check(value)``: why a value of the
    right type is not allowed (None: it is), for what choices and bounds cannot say."""
    meta = {"choices": choices, "low": low, "high": high, "low_open": low_open,
            "high_open": high_open, "check": check, "help": help}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


# -- dotted paths into raw config dicts ------------------------------------------

def get_path(cfg: dict, path: str, default: Any = None) -> Any:
    """``cfg["a"]["b"]`` for ``"a.b"`` (``default`` where a part is missing)."""
    node = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def set_path(cfg: dict, path: str, value: Any) -> None:
    """Set ``"a.b"`` in a raw dict, making (or replacing non-mapping) intermediate levels."""
    parts = path.split(".")
    node = cfg
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[parts[-1]] = value


def fmt(v: Any) -> str:
    """A value as a study file would write it (true/false, 0.1, names)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


# -- checking -----------------------------------------------------------------

def type_name(tp) -> str:
    return getattr(tp, "__name__", str(tp)).replace("NoneType", "null")


def build(cls, data: Any, prefix: str = ""):
    """An instance of the dataclass ``cls`` from a raw mapping, every field checked.

    ``prefix`` is the dotted place of ``data`` in its file (``"pruner."``), so errors
    name the full field."""
    if not isinstance(data, dict):
        raise ConfigError(prefix.rstrip(".") or "<root>",
                          f"expected a mapping, got {type(data).__name__} {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise ConfigError(prefix + str(unknown[0]),
                          f"unknown key; allowed keys here: {', '.join(fields)}")
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            continue
        kwargs[name] = coerce(hints[name], data[name], prefix + name, f.metadata)
    return cls(**kwargs)


def coerce(tp, value, name: str, meta):
    """``value`` checked against the type ``tp`` and the constraints ``meta`` of field ``name``."""
    if dataclasses.is_dataclass(tp):
        return build(tp, value if value is not None else {}, name + ".")
    args = typing.get_args(tp)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), tp) if args else tp
    if value is None:
        if optional:
            return None
        raise ConfigError(name, f"must be a {type_name(base)}, got null")
    if base is bool:
        if not isinstance(value, bool):
            raise ConfigError(name, f"must be true or false, got {value!r}")
    elif base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ConfigError(name, f"must be an integer, got {value!r}")
    elif base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(name, f"must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):  # NaN passes every range check (all comparisons are false)
            raise ConfigError(name, f"must be a finite number, got {value!r}")
    elif base is str:
        if not isinstance(value, str):
            raise ConfigError(name, f"must be a string, got {value!r}")
    elif base is dict:
        if not isinstance(value, dict):
            raise ConfigError(name, f"must be a mapping, got {value!r}")
        check_finite(value, name)
    elif base is list:
        if not isinstance(value, list):
            raise ConfigError(name, f"must be a list, got {value!r}")
        check_finite(value, name)
    why = meta.get("check") and meta["check"](value)
    if why:
        raise ConfigError(name, why)
    choices = meta.get("choices")
    if choices and value not in choices:
        raise ConfigError(name, f"must be one of {', '.join(choices)}; got {value!r}")
    low, high = meta.get("low"), meta.get("high")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        bad_low = low is not None and (value <= low if meta.get("low_open") else value < low)
        bad_high = high is not None and (value >= high if meta.get("high_open") else value > high)
        if bad_low or bad_high:
            if high is None:  # one-sided: say it the short way
                raise ConfigError(name, f"must be {'>' if meta.get('low_open') else '>='} {low:g}; got {value!r}")
            lo = "(" if meta.get("low_open") else "["
            hi = ")" if meta.get("high_open") else "]"
            raise ConfigError(name, f"must be in {lo}{low}, {high}{hi}; got {value!r}")
    return value


def check_field(cls, path: str, value: Any, field_name: str) -> None:
    """Check ``value`` against the field at dotted ``path`` of dataclass ``cls`` (type, choices,
    bounds); the error names ``field_name`` (where the value was written)."""
    parts = path.split(".")
    for i, part in enumerate(parts):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        f = fields[part]
        hint = typing.get_type_hints(cls)[part]
        if i == len(parts) - 1:
            try:
                coerce(hint, value, path, f.metadata)
            except ConfigError as e:
                raise ConfigError(field_name, f"not allowed for {path}: {e.message}") from None
            return
        cls = hint


def check_finite(value: Any, name: str) -> None:
    """Refuse NaN and infinities anywhere inside ``value`` (algorithm parameters, milestones)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number, got {value!r}")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{name}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_finite(v, f"{name}[{i}]")


# -- YAML ---------------------------------------------------------------------

class Loader(yaml.SafeLoader):
    """SafeLoader that reads ``1e-3`` and ``5e-3`` as numbers (YAML 1.2), not strings.

    PyYAML follows YAML 1.1, whose float needs a dot (``5.0e-3``): ``lr: 5e-3`` would be the
    string '5e-3' and be refused as "must be a number". Every reader of user YAML uses this.
    """


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"))


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)


# What `read_yaml` says about an empty file, by what the file should be.
MINIMAL_TRAIN = "a minimal TrainConfig is `dataset: {name: digits}` (every other field has a default)"


def read_yaml(path: str | Path, minimal: str = MINIMAL_TRAIN) -> dict:
    p = Path(path)
    if not p.is_file():
        raise ConfigError("", f"no such file: {p}")
    try:
        data = load_yaml(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError("", f"not valid YAML: {e}", str(p)) from None
    if data is None:  # empty, or only comments: a mistake more often than a wish for all defaults
        raise ConfigError("", f"the file is empty; {minimal}", str(p))
    if not isinstance(data, dict):
        raise ConfigError("", f"expected a mapping at the top level, got {type(data).__name__}", str(p))
    return data


def apply_override(data: dict, item: str, source: str | None = None) -> None:
    """Apply one ``KEY=VALUE`` (dotted key, YAML value) to a raw config dict."""
    if "=" not in item:
        raise ConfigError("--set", f"expected KEY=VALUE, got {item!r}", source)
    key, raw = item.split("=", 1)
    try:
        value = load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    set_path(data, key.strip(), value)
