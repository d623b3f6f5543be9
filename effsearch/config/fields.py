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
import reprlib
import typing
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from effsearch.config.arguments import named, said

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from typing import TypeVar

    from _typeshed import DataclassInstance

    D = TypeVar("D", bound=DataclassInstance)


# How much of a value (or a field name a file made up) a message quotes: enough to recognise it.
QUOTE_LIMIT = 200
# The longest message a ConfigError keeps: the rest is cut, whatever a message quotes. Messages
# quote values with ``quote``; this also bounds those that quote otherwise (a library's own text).
MESSAGE_LIMIT = 2000


class ConfigError(ValueError):
    """A config value that is wrong; ``str()`` names the source and the field."""

    def __init__(self, field_name: str, message: str, source: str | None = None) -> None:
        self.field = field_name if len(field_name) <= QUOTE_LIMIT else f"{field_name[:QUOTE_LIMIT]}..."
        if len(message) > MESSAGE_LIMIT:
            message = f"{message[:MESSAGE_LIMIT]}... ({len(message):,} characters)"
        self.message = message
        self.source = source
        super().__init__(self._text())

    def _text(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}{self.field}: {self.message}" if self.field else f"{where}{self.message}"

    def __str__(self) -> str:
        """The text, an argument it names worded for who reads it (``arguments.said``)."""
        where = f"{said(self.source)}: " if self.source else ""
        text = said(self.message)
        return f"{where}{named(self.field)}: {text}" if self.field else f"{where}{text}"

    def with_source(self, source: str) -> ConfigError:
        return ConfigError(self.field, self.message, source)

    def under(self, prefix: str) -> ConfigError:
        """The same error, its field under ``prefix`` (``base`` + ``optimizer.lr``: ``base.optimizer.lr``)."""
        return ConfigError(f"{prefix}.{self.field}" if self.field else prefix, self.message, self.source)


# The largest seed every receiver takes: Composer's seed_all, np.random.seed, scikit-learn's
# random_state and Optuna's samplers (NumPy's RandomState) all take [0, 2**32 - 1].
SEED_MAX = 2**32 - 1


def spec(
    default: Any = dataclasses.MISSING,
    *,
    choices: Collection[str] | None = None,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    factory: Callable[[], Any] | None = None,
    check: Callable[[Any], str | None] | None = None,
    help: str = "",
) -> Any:
    """A dataclass field with its allowed values attached. ``check(value)``: why a value of the
    right type is not allowed (None: it is), for what choices and bounds cannot say."""
    meta = {
        "choices": choices,
        "low": low,
        "high": high,
        "low_open": low_open,
        "high_open": high_open,
        "check": check,
        "help": help,
    }
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


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 4, 60, 60, 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 8


def quote(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters: a long string says how long
    it was, a large list or mapping shows its first items (a 100 KB value stays a short line)."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    text = _SHORT.repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


# -- checking -----------------------------------------------------------------


def type_name(tp: object) -> str:
    return getattr(tp, "__name__", str(tp)).replace("NoneType", "null")


def build(cls: type[D], data: Any, prefix: str = "") -> D:
    """An instance of the dataclass ``cls`` from a raw mapping, every field checked.

    ``prefix`` is the dotted place of ``data`` in its file (``"pruner."``), so errors
    name the full field."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if not isinstance(data, dict):
        # `tokenizer: bytes` for `tokenizer: {name: bytes}`: the mapping it means, shown
        named = isinstance(data, str) and "name" in fields
        raise ConfigError(
            prefix.rstrip(".") or "<root>",
            f"expected a mapping, got {type(data).__name__} {quote(data)}"
            + (f" (write {{name: {data}}})" if named else ""),
        )
    hints = typing.get_type_hints(cls)
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise ConfigError(prefix + str(unknown[0]), f"unknown key; allowed keys here: {', '.join(fields)}")
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            continue
        kwargs[name] = coerce(hints[name], data[name], prefix + name, f.metadata)
    return cls(**kwargs)


def coerce(tp: Any, value: Any, name: str, meta: Mapping[str, Any]) -> Any:
    """``value`` checked against the type ``tp`` and the constraints ``meta`` of field ``name``."""
    if dataclasses.is_dataclass(tp):
        return build(tp, value if value is not None else {}, name + ".")  # type: ignore[arg-type]  # a hint: a class
    args = typing.get_args(tp)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), tp) if args else tp
    if value is None:
        if optional:
            return None
        raise ConfigError(name, f"must be a {type_name(base)}, got null")
    if base is bool:
        if not isinstance(value, bool):
            raise ConfigError(name, f"must be true or false, got {quote(value)}")
    elif base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ConfigError(name, f"must be an integer, got {quote(value)}")
    elif base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(name, f"must be a number, got {quote(value)}")
        value = float(value)
        if not math.isfinite(value):  # NaN passes every range check (all comparisons are false)
            raise ConfigError(name, f"must be a finite number, got {quote(value)}")
    elif base is str:
        if not isinstance(value, str):
            raise ConfigError(name, f"must be a string, got {quote(value)}")
    elif base is dict:
        if not isinstance(value, dict):
            raise ConfigError(name, f"must be a mapping, got {quote(value)}")
        check_finite(value, name)
    elif base is list:
        if not isinstance(value, list):
            raise ConfigError(name, f"must be a list, got {quote(value)}")
        check_finite(value, name)
    why = meta.get("check") and meta["check"](value)
    if why:
        raise ConfigError(name, why)
    choices = meta.get("choices")
    if choices and value not in choices:
        raise ConfigError(name, f"must be one of {', '.join(choices)}; got {quote(value)}")
    low, high = meta.get("low"), meta.get("high")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        bad_low = low is not None and (value <= low if meta.get("low_open") else value < low)
        bad_high = high is not None and (value >= high if meta.get("high_open") else value > high)
        if bad_low or bad_high:
            if high is None:  # one-sided: say it the short way
                raise ConfigError(name, f"must be {'>' if meta.get('low_open') else '>='} {low:g}; got {quote(value)}")
            lo = "(" if meta.get("low_open") else "["
            hi = ")" if meta.get("high_open") else "]"
            raise ConfigError(name, f"must be in {lo}{low}, {high}{hi}; got {quote(value)}")
    return value


def check_field(cls: type[DataclassInstance], path: str, value: Any, field_name: str) -> None:
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
        raise ConfigError(name, f"must be a finite number, got {quote(value)}")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{name}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_finite(v, f"{name}[{i}]")


# -- YAML ---------------------------------------------------------------------

# Nodes aliases may add to a document (each use of an alias counts the values it stands for).
# A study file's anchors add tens; a 785-byte "billion laughs" adds 10**9, and a message echoing
# one of its values would be gigabytes long.
ALIAS_LIMIT = 10_000

# How deep values may nest (mappings and lists, block or flow). A config nests a handful of levels.
# Checked as PyYAML's scanner reads, before anything is composed: the composer recurses (a few
# hundred levels is Python's end), and the scanner's work on nested flow collections (`[[[...`)
# grows with the square of their depth (Scanner.stale_possible_simple_keys runs over every open level
# at each token).
DEPTH_LIMIT = 100


class Loader(yaml.SafeLoader):
    """SafeLoader that reads ``1e-3`` and ``5e-3`` as numbers (YAML 1.2), not strings, and refuses a
    key given twice in one mapping, aliases that expand past ``ALIAS_LIMIT`` values and values
    nested deeper than ``DEPTH_LIMIT``.

    PyYAML follows YAML 1.1, whose float needs a dot (``5.0e-3``): ``lr: 5e-3`` would be the
    string '5e-3' and be refused as "must be a number". It also keeps the last of two equal keys
    without a word (``epochs: 1`` ... ``epochs: 7`` trains 7). Every reader of user YAML uses this.
    """

    def construct_document(self, node: yaml.Node) -> Any:
        check_aliases(node)
        check_duplicates(node)
        return super().construct_document(node)

    # The scanner's two ways in: an indentation level (a block mapping or sequence) and a flow
    # collection's `[` or `{`.
    def add_indent(self, column: int) -> bool:
        added = super().add_indent(column)
        if added:
            self._check_depth(0)
        return added

    def fetch_flow_collection_start(self, TokenClass: type) -> None:
        self._check_depth(1)
        super().fetch_flow_collection_start(TokenClass)

    def _check_depth(self, opening: int) -> None:
        """The levels open (``indents`` holds one per block level) and the one ``opening``."""
        if len(self.indents) + self.flow_level + opening > DEPTH_LIMIT:
            raise ConfigError(
                "",
                f"values nested more than {DEPTH_LIMIT} levels deep (line {self.line + 1}); no config needs that many",
            )


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"),
)

MERGE = "tag:yaml.org,2002:merge"


def children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def check_aliases(root: yaml.Node) -> None:
    """Refuse a document whose aliases stand for more than ALIAS_LIMIT values, or for themselves.

    An alias is the same node as its anchor, so a document is a graph: its size as values is
    counted once per node (memoised), which stays cheap however far it would expand."""
    sizes: dict[int, int] = {}
    distinct: set[int] = set()
    pending: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in pending:  # `&a [*a]`: a value that contains itself never ends
            raise ConfigError(
                "",
                f"an alias inside its own anchor (line {node.start_mark.line + 1}) "
                "stands for a value that contains itself; write the value out",
            )
        pending.add(key)
        distinct.add(key)
        total = 1 + sum(size(child) for child in children(node))
        pending.discard(key)
        sizes[key] = total
        return total

    added = size(root) - len(distinct)
    if added > ALIAS_LIMIT:
        raise ConfigError(
            "",
            f"its YAML aliases expand to {added:,} more values (at most {ALIAS_LIMIT:,}): "
            "an alias bomb, or anchors reused far more than a config needs",
        )


def check_duplicates(root: yaml.Node, prefix: str = "") -> None:
    """Refuse a mapping that gives one key twice, naming its dotted place and both lines (YAML
    keeps the last without a word). A merge key (``<<: *base``) is not a repeat: overriding what
    it merges in is what it is for."""
    seen_nodes: set[int] = set()

    def walk(node: yaml.Node, where: str) -> None:
        if id(node) in seen_nodes:  # an alias: its anchor was checked
            return
        seen_nodes.add(id(node))
        if not isinstance(node, yaml.MappingNode):
            for child in children(node):
                walk(child, where)
            return
        lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE:
                walk(value_node, where)
                continue
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            name = f"{where}.{key}" if where else str(key)
            line = key_node.start_mark.line + 1
            if key is not None and key in lines:
                raise ConfigError(
                    name,
                    f"given twice (line {lines[key]} and line {line}); YAML would keep only the last: give it once",
                )
            if key is not None:
                lines[key] = line
            walk(value_node, name)

    walk(root, prefix)


def load_yaml(text: str) -> Any:
    """``text`` as YAML (effsearch's Loader); a ConfigError for what no config holds."""
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)
    except RecursionError:  # deeper than Python recurses, through aliases (the Loader's depth check counts none)
        raise ConfigError(
            "", "values nested too deeply to read (past Python's recursion limit); no config needs that many"
        ) from None


def yaml_problem(e: yaml.YAMLError) -> str:
    """A YAML error as one line: where, and what (PyYAML's own text spans several lines)."""
    if isinstance(e, yaml.reader.ReaderError):  # a control character, a NUL
        code = ord(e.character) if isinstance(e.character, str) else e.character
        return f"character #x{code:02x} at offset {e.position} is not allowed in YAML ({e.reason})"
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    what = "; ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    tab = "; YAML indents with spaces, not tabs" if "'\\t'" in what else ""
    return where + (what or " ".join(str(e).split())) + tab


def read_text(path: Path) -> str:
    """A user's file as UTF-8 text (what YAML files are), whatever the locale; any other bytes are
    a ConfigError naming the file and where the first bad byte is."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError("", f"cannot read it: {e.strerror or e}", str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(
            "",
            f"not UTF-8 text: byte 0x{data[e.start]:02x} on line {line} (offset {e.start}) "
            "cannot be decoded; save it as UTF-8 (a YAML file is UTF-8)",
            str(path),
        ) from None


# What `read_yaml` says about an empty file, by what the file should be.
MINIMAL_TRAIN = "a minimal TrainConfig is `dataset: {name: digits}` (every other field has a default)"


def read_yaml(path: str | Path, minimal: str = MINIMAL_TRAIN) -> dict:
    """The mapping a user's YAML file holds; anything else is a ConfigError naming the file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError("", f"{p} is a folder, not a file" if p.is_dir() else f"no such file: {p}")
    text = read_text(p)
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise ConfigError("", f"not valid YAML: {yaml_problem(e)}", str(p)) from None
    except ConfigError as e:  # a key given twice, an alias bomb
        raise e.with_source(str(p)) from None
    if data is None:  # empty, or only comments: a mistake more often than a wish for all defaults
        raise ConfigError("", f"the file is empty; {minimal}", str(p))
    if not isinstance(data, dict):
        raise ConfigError("", f"expected a mapping at the top level, got {type(data).__name__}", str(p))
    return data


# A --set key: dotted names (``optimizer.lr``, ``algorithms.ema.half_life``).
SET_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$")


def apply_override(data: dict, item: str) -> str:
    """Apply one ``KEY=VALUE`` (dotted key, YAML value) to a raw config dict; return the key. A
    malformed item is the flag's error (named ``--set``), not the config file's."""
    if "=" not in item:
        raise ConfigError("--set", f"expected KEY=VALUE, got {quote(item)}")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not SET_KEY.match(key):
        raise ConfigError(
            "--set", f"expected KEY=VALUE with a dotted field name as KEY (e.g. optimizer.lr=0.1); got {quote(item)}"
        )
    try:
        value = load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    except ConfigError as e:  # a key given twice, an alias bomb, inside the value
        raise ConfigError(f"{key}.{e.field}" if e.field else key, e.message, "--set") from None
    set_path(data, key, value)
    return key


def overridden(error: ConfigError, keys: list[str]) -> bool:
    """Whether ``error`` is about a field one of the ``--set`` keys gave (or a field inside it, or
    the mapping that holds it): its message then names --set, not the file."""
    name = error.field
    return bool(name) and any(
        name == k or name.startswith(k + ".") or name.startswith(k + "[") or k.startswith(name + ".") for k in keys
    )
