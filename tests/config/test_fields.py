"""config/fields.py on its own: the one coercion, bounds and their messages, dotted paths, the
YAML reader's refusals, --set items, and how errors quote and name things."""

import dataclasses
import re
from dataclasses import dataclass

import pytest
import yaml

from effsearch.config import fields as F
from effsearch.config.fields import ConfigError, spec


@dataclass
class Inner:
    rate: float = spec(0.5, low=0.0, high=1.0, low_open=True, help="a rate")
    name: str = spec("a", choices=("a", "b"))


def _even(v):
    return None if v % 2 == 0 else f"must be even; got {v}"


@dataclass
class Outer:
    count: int = spec(1, low=1)
    ratio: float = spec(0.1, low=0.0, high=1.0)
    part: float = spec(0.5, low=0.0, high=1.0, low_open=True, high_open=True)
    above: float = spec(1.0, low=0.0, low_open=True)
    even: int = spec(2, check=_even)
    flag: bool = spec(False)
    label: str | None = spec(None)
    table: dict = spec(factory=dict)
    items: list = spec(factory=list)
    inner: Inner = spec(factory=Inner)


def err(fn, *args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        fn(*args, **kwargs)
    return e.value


# -- spec and build --------------------------------------------------------------------------


def test_spec_keeps_every_constraint_and_its_default():
    f = {x.name: x for x in dataclasses.fields(Outer)}
    assert f["count"].default == 1 and f["table"].default_factory() == {}
    assert dict(f["part"].metadata) == {
        "choices": None,
        "low": 0.0,
        "high": 1.0,
        "low_open": True,
        "high_open": True,
        "check": None,
        "help": "",
    }
    assert dict(f["above"].metadata)["low_open"] is True and dict(f["above"].metadata)["high_open"] is False
    assert dict(f["even"].metadata)["check"] is _even
    assert dict({x.name: x for x in dataclasses.fields(Inner)}["name"].metadata)["choices"] == ("a", "b")
    assert dict({x.name: x for x in dataclasses.fields(Inner)}["rate"].metadata)["help"] == "a rate"
    assert Outer() == Outer(
        count=1, ratio=0.1, part=0.5, above=1.0, even=2, flag=False, label=None, table={}, items=[], inner=Inner()
    )


def test_spec_made_at_run_time_attaches_its_constraints():
    """As test_spec_keeps_every_constraint_and_its_default, on a dataclass made inside the test
    (a class body at import runs spec before any mutation test can switch a mutant on)."""

    @dataclass
    class Made:
        plain: int = spec(3)
        ranged: float = spec(0.5, low=0.0, high=1.0, choices=(0.5,), check=_even, help="h")
        made: list = spec(factory=lambda: [1])

    f = {x.name: x for x in dataclasses.fields(Made)}
    assert dict(f["plain"].metadata) == {
        "choices": None,
        "low": None,
        "high": None,
        "low_open": False,
        "high_open": False,
        "check": None,
        "help": "",
    }
    assert dict(f["ranged"].metadata) == {
        "choices": (0.5,),
        "low": 0.0,
        "high": 1.0,
        "low_open": False,
        "high_open": False,
        "check": _even,
        "help": "h",
    }
    assert dict(f["made"].metadata)["help"] == "" and dict(f["made"].metadata)["low_open"] is False
    assert Made() == Made(plain=3, ranged=0.5, made=[1]) and Made().made is not Made().made
    assert f["plain"].default == 3 and f["made"].default is dataclasses.MISSING
    with pytest.raises(TypeError):
        dataclass(type("NoDefault", (), {"__annotations__": {"x": int}, "x": spec()}))()


def test_build_checks_every_given_field_and_keeps_the_defaults():
    o = F.build(Outer, {"count": 3, "ratio": 1, "inner": {"rate": 1.0}, "label": None, "flag": True})
    assert o == Outer(count=3, ratio=1.0, flag=True, inner=Inner(rate=1.0))
    assert isinstance(o.ratio, float) and o.inner.name == "a"
    assert F.build(Outer, {"inner": None}).inner == Inner()  # null: the defaults
    e = err(F.build, Outer, {"count": 1, "cuont": 2})
    assert (e.field, e.message) == (
        "cuont",
        "unknown key; allowed keys here: count, ratio, part, above, even, flag, label, table, items, inner",
    )
    assert err(F.build, Outer, {"inner": {"rat": 1}}).field == "inner.rat"
    assert err(F.build, Outer, {"inner": {"rate": 0}}, "pruner.").field == "pruner.inner.rate"
    e = err(F.build, Outer, [1, 2])
    assert (e.field, e.message) == ("<root>", "expected a mapping, got list [1, 2]")
    assert err(F.build, Outer, "x", "base.").field == "base"


# -- coerce: types ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("count", "3", "must be an integer, got '3'"),
        ("count", True, "must be an integer, got True"),
        ("count", 1.5, "must be an integer, got 1.5"),
        ("count", None, "must be a int, got null"),
        ("ratio", "0.5", "must be a number, got '0.5'"),
        ("ratio", False, "must be a number, got False"),
        ("ratio", float("nan"), "must be a finite number, got nan"),
        ("ratio", float("inf"), "must be a finite number, got inf"),
        ("flag", 1, "must be true or false, got 1"),
        ("flag", "yes", "must be true or false, got 'yes'"),
        ("label", 5, "must be a string, got 5"),
        ("table", [1], "must be a mapping, got [1]"),
        ("table", {"a": {"b": float("nan")}}, "must be a finite number, got nan"),
        ("items", {"a": 1}, "must be a list, got {'a': 1}"),
        ("items", [1, float("-inf")], "must be a finite number, got -inf"),
        ("inner", 3, "expected a mapping, got int 3"),
        ("inner", "b", "expected a mapping, got str 'b' (write {name: b})"),  # `tokenizer: bytes`
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_the_field(field, value, message):
    e = err(F.build, Outer, {field: value}, "s.")
    assert e.message == message, e.message
    assert e.field.startswith(f"s.{field}")


def test_nested_non_finite_values_are_named_where_they_are():
    assert err(F.build, Outer, {"table": {"a": {"b": float("nan")}}}).field == "table.a.b"
    assert err(F.build, Outer, {"items": [1, [2, float("inf")]]}).field == "items[1][1]"


def test_what_each_type_takes():
    o = F.build(
        Outer, {"count": 4.0, "ratio": 0, "label": "x", "table": {"k": [1.5]}, "items": [{"a": 1}], "flag": False}
    )
    assert o.count == 4 and type(o.count) is int
    assert o.ratio == 0.0 and type(o.ratio) is float
    assert (o.label, o.table, o.items, o.flag) == ("x", {"k": [1.5]}, [{"a": 1}], False)
    assert F.build(Outer, {"label": None}).label is None


# -- coerce: choices, checks, bounds ---------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("count", 0, "must be >= 1; got 0"),
        ("above", 0.0, "must be > 0; got 0.0"),
        ("ratio", -0.1, "must be in [0.0, 1.0]; got -0.1"),
        ("ratio", 1.1, "must be in [0.0, 1.0]; got 1.1"),
        ("part", 0.0, "must be in (0.0, 1.0); got 0.0"),
        ("part", 1.0, "must be in (0.0, 1.0); got 1.0"),
        ("even", 3, "must be even; got 3"),
    ],
)
def test_bounds_open_and_closed_and_checks(field, value, message):
    e = err(F.build, Outer, {field: value})
    assert (e.field, e.message) == (field, message)


def test_values_on_a_closed_bound_and_inside_an_open_one_are_taken():
    o = F.build(Outer, {"count": 1, "ratio": 0.0, "part": 1e-9, "above": 1e-9, "even": 4})
    assert (o.count, o.ratio, o.part, o.above, o.even) == (1, 0.0, 1e-9, 1e-9, 4)
    assert F.build(Outer, {"ratio": 1.0, "part": 1 - 1e-9}).ratio == 1.0
    assert F.build(Inner, {"rate": 1.0}).rate == 1.0  # high closed, low open
    e = err(F.build, Inner, {"rate": 0.0})
    assert e.message == "must be in (0.0, 1.0]; got 0.0"
    e = err(F.build, Inner, {"name": "c"})
    assert (e.field, e.message) == ("name", "must be one of a, b; got 'c'")


def test_check_field_checks_one_dotted_field_and_names_where_it_was_written():
    F.check_field(Outer, "inner.rate", 0.5, "space.inner.rate")
    F.check_field(Outer, "count", 7, "x")
    e = err(F.check_field, Outer, "inner.rate", 2.0, "space.fixed.inner.rate")
    assert (e.field, e.message) == (
        "space.fixed.inner.rate",
        "not allowed for inner.rate: must be in (0.0, 1.0]; got 2.0",
    )
    assert (
        err(F.check_field, Outer, "count", "two", "c").message == "not allowed for count: must be an integer, got 'two'"
    )


# -- paths, formatting, quoting --------------------------------------------------------------


def test_dotted_get_and_set():
    cfg = {"a": {"b": 1}, "c": 2}
    assert F.get_path(cfg, "a.b") == 1 and F.get_path(cfg, "c") == 2
    assert F.get_path(cfg, "a.x", "d") == "d" and F.get_path(cfg, "c.x", 5) == 5 and F.get_path(cfg, "z") is None
    F.set_path(cfg, "a.d", 3)
    F.set_path(cfg, "c.e.f", 4)  # a number in the way is replaced by a level
    F.set_path(cfg, "g", 5)
    assert cfg == {"a": {"b": 1, "d": 3}, "c": {"e": {"f": 4}}, "g": 5}


def test_fmt_writes_values_as_a_study_file_would():
    assert [F.fmt(True), F.fmt(False), F.fmt(0.1), F.fmt(1e-05), F.fmt(3), F.fmt("sgd")] == [
        "true",
        "false",
        "0.1",
        "1e-05",
        "3",
        "sgd",
    ]
    assert F.type_name(int) == "int" and F.type_name(type(None)) == "null"
    assert F.type_name(int | None) == "int | None"  # no __name__: its text


def test_quote_keeps_a_value_short():
    assert F.quote("abc") == "'abc'" and F.quote("x" * 200) == repr("x" * 200)
    assert F.quote("y" * 201) == f"{'y' * 200!r}... (201 characters)"
    assert F.quote("z" * 5000, limit=10) == f"{'z' * 10!r}... (5,000 characters)"
    assert F.quote(list(range(100))) == "[0, 1, 2, 3, 4, 5, 6, 7, ...]"
    short = F.quote({"k": "v" * 100})
    assert short.startswith("{'k': 'vvv") and "..." in short and len(short) < 70
    assert F.quote([[[[[1]]]]]) == "[[[[[...]]]]]"
    assert F.quote(list(range(8)), limit=5) == "[0, 1..."
    assert F.quote(list(range(8)), limit=24) == "[0, 1, 2, 3, 4, 5, 6, 7]"  # exactly the limit: whole
    assert F.quote(7) == "7"


# -- ConfigError -----------------------------------------------------------------------------


def test_config_error_names_source_and_field_and_bounds_its_length():
    e = ConfigError("optimizer.lr", "must be a number", "c.yaml")
    assert str(e) == "c.yaml: optimizer.lr: must be a number" and (e.field, e.source) == ("optimizer.lr", "c.yaml")
    assert str(ConfigError("", "empty file", "c.yaml")) == "c.yaml: empty file"
    assert str(ConfigError("seed", "too big")) == "seed: too big" and str(ConfigError("", "no")) == "no"
    long = ConfigError("f" * 201, "m" * 2001)
    assert long.field == "f" * 200 + "..." and long.message == "m" * 2000 + "... (2,001 characters)"
    assert ConfigError("f" * 200, "m" * 2000).field == "f" * 200
    assert ConfigError("f", "m" * 2000).message == "m" * 2000
    moved = e.with_source("d.yaml")
    assert (moved.field, moved.message, moved.source) == ("optimizer.lr", "must be a number", "d.yaml")
    under = e.under("base")
    assert (under.field, under.message, under.source) == ("base.optimizer.lr", "must be a number", "c.yaml")
    assert ConfigError("", "m", "s").under("base").field == "base"


# -- YAML ------------------------------------------------------------------------------------


def test_yaml_reads_exponents_as_numbers_and_refuses_repeated_keys():
    assert F.load_yaml("lr: 5e-3\nwd: 1E+2\nn: -2e1\ns: e5\nv: 1.5") == {
        "lr": 0.005,
        "wd": 100.0,
        "n": -20.0,
        "s": "e5",
        "v": 1.5,
    }
    e = err(F.load_yaml, "a:\n  b: 1\n  c: 2\n  b: 3\n")
    assert (e.field, e.message) == (
        "a.b",
        "given twice (line 2 and line 4); YAML would keep only the last: give it once",
    )
    assert err(F.load_yaml, "- {x: 1, x: 2}").field == "x"
    assert err(F.load_yaml, "top: 1\ntop: 2").field == "top"
    # A merge key overrides what it merges in: no repeat. An alias is checked once, at its anchor.
    assert F.load_yaml("base: &b {x: 1}\nmine:\n  <<: *b\n  x: 2\nagain: *b") == {
        "base": {"x": 1},
        "mine": {"x": 2},
        "again": {"x": 1},
    }
    assert F.load_yaml("a: [1, {b: 2}]\nc: {d: [3]}") == {"a": [1, {"b": 2}], "c": {"d": [3]}}


def test_a_repeat_is_found_in_lists_merges_and_after_a_merge():
    assert err(F.load_yaml, "a:\n  - {x: 1, x: 2}").field == "a.x"
    assert err(F.load_yaml, "a:\n  <<: {x: 1, x: 2}").field == "a.x"  # inside what is merged
    assert err(F.load_yaml, "b: &b {y: 1}\na:\n  <<: *b\n  x: 1\n  x: 2").field == "a.x"  # after the merge
    with pytest.raises(yaml.YAMLError):  # a list as a key: YAML's own refusal, not a crash of the check
        F.load_yaml("? [1, 2]\n: v")
    e = err(F.check_duplicates, yaml.compose("x: {y: 1, y: 2}"), "base")
    assert e.field == "base.x.y" and e.message.startswith("given twice (line 1 and line 1)")


def _bomb(levels: int, width: int = 10) -> str:
    lines = ["a0: &a0 [x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines)


def test_aliases_are_counted_once_per_node_and_a_bomb_is_refused():
    assert F.load_yaml(_bomb(3))["a2"] == [[["x"]] * 10] * 10  # 110 values through aliases
    ok = F.load_yaml(_bomb(4, width=10)[:-1] + ", x]")  # past 1,000 but not 10,000
    assert len(ok["a3"]) == 11
    e = err(F.load_yaml, _bomb(5))  # about 10**4 values added
    added = int(
        re.match(r"its YAML aliases expand to ([\d,]+) more values \(at most 10,000\)", e.message)[1].replace(",", "")
    )
    assert e.field == "" and added > 10_000
    assert e.message.endswith(": an alias bomb, or anchors reused far more than a config needs")
    e = err(F.load_yaml, "a: &a [*a]")
    assert (e.field, e.message) == (
        "",
        "an alias inside its own anchor (line 1) stands for a value that contains itself; write the value out",
    )
    assert e.message == err(F.load_yaml, "a: &a [*a]").message
    assert F.ALIAS_LIMIT == 10_000


def test_alias_size_counts_each_key_and_value_an_alias_repeats(monkeypatch):
    text = "a: &m {k: v, l: [w, x]}\nb: *m\nc: *m"  # each alias repeats 1 + 2 keys + 2 values + 2 items = 7
    monkeypatch.setattr(F, "ALIAS_LIMIT", 14)
    assert F.load_yaml(text)["c"] == {"k": "v", "l": ["w", "x"]}
    monkeypatch.setattr(F, "ALIAS_LIMIT", 13)
    assert err(F.load_yaml, text).message.startswith("its YAML aliases expand to 14 more values (at most 13)")
    assert F.children(yaml.compose("1")) == []


def test_too_deep_a_document_is_a_config_error():
    import inspect
    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 60)  # reached at a depth of tens, under DEPTH_LIMIT
    try:
        e = err(F.load_yaml, "[" * 60 + "]" * 60)
    finally:
        sys.setrecursionlimit(limit)
    assert (e.field, e.message) == (
        "",
        "values nested too deeply to read (past Python's recursion limit); no config needs that many",
    )


def test_yaml_problems_are_one_line_with_their_place():
    with pytest.raises(yaml.YAMLError) as e:
        F.load_yaml("a: [1, 2\nb: 3")
    text = F.yaml_problem(e.value)
    assert text.startswith("line ") and "\n" not in text and "expected ',' or ']'" in text
    with pytest.raises(yaml.YAMLError) as e:
        F.load_yaml("a: 1\x07")
    assert (
        F.yaml_problem(e.value) == "character #x07 at offset 4 is not allowed in YAML (special characters are "
        "not allowed)"
    )
    with pytest.raises(yaml.YAMLError) as e:
        F.load_yaml("key: value: other")
    assert F.yaml_problem(e.value) == "line 1, column 11: mapping values are not allowed here"
    with pytest.raises(yaml.YAMLError) as e:
        F.load_yaml("model:\n\tname: tiny-cnn\n")
    assert F.yaml_problem(e.value).endswith(
        "found character '\\t' that cannot start any token; YAML indents with spaces, not tabs"
    )
    assert F.yaml_problem(yaml.YAMLError("plain\n  text")) == "plain text"
    mark = yaml.Mark("c.yaml", 0, 4, 2, None, None)
    only_context = yaml.MarkedYAMLError(context="while scanning a block", context_mark=mark)
    assert F.yaml_problem(only_context) == "line 5, column 3: while scanning a block"


def test_read_text_and_read_yaml_name_the_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_bytes("epochs: 2 # é\n".encode())
    assert F.read_text(p) == "epochs: 2 # é\n" and F.read_yaml(p) == {"epochs": 2}
    p.write_bytes(b"a: 1\nb: 2\n# caf\xe9\n")
    e = err(F.read_text, p)
    assert (e.field, e.source) == ("", str(p))
    assert (
        e.message == "not UTF-8 text: byte 0xe9 on line 3 (offset 15) cannot be decoded; save it as UTF-8 "
        "(a YAML file is UTF-8)"
    )
    p.write_bytes(b"\nx: \xff\n")
    assert err(F.read_text, p).message.startswith("not UTF-8 text: byte 0xff on line 2 (offset 4)")
    e = err(F.read_text, tmp_path)
    assert (e.field, e.message, e.source) == ("", "cannot read it: Is a directory", str(tmp_path))
    e = err(F.read_yaml, tmp_path / "missing.yaml")
    assert (e.field, e.message) == ("", f"no such file: {tmp_path / 'missing.yaml'}")
    assert err(F.read_yaml, tmp_path).message == f"{tmp_path} is a folder, not a file"
    for text, message in (
        ("# only a comment\n", f"the file is empty; {F.MINIMAL_TRAIN}"),
        ("- 1\n- 2\n", "expected a mapping at the top level, got list"),
        (
            "a: [1\n",
            "not valid YAML: line 2, column 1: while parsing a flow sequence; "
            "expected ',' or ']', but got '<stream end>'",
        ),
    ):
        p.write_text(text)
        e = err(F.read_yaml, p)
        assert (e.field, e.message, e.source) == ("", message, str(p)), e.message
    assert err(F.read_yaml, p, minimal="a study needs base:").message.startswith("not valid YAML")
    p.write_text("")
    assert err(F.read_yaml, p, minimal="a study needs base:").message == "the file is empty; a study needs base:"
    p.write_text("x: 1\nx: 2\n")
    e = err(F.read_yaml, p)
    assert (e.field, e.source) == ("x", str(p)) and e.message.startswith("given twice")


# -- --set -----------------------------------------------------------------------------------


def test_apply_override_sets_a_dotted_yaml_value_and_returns_its_key():
    data = {"optimizer": {"lr": 0.1}}
    assert F.apply_override(data, " optimizer.lr =5e-3") == "optimizer.lr"
    assert F.apply_override(data, "algorithms.ema.half_life=10ba") == "algorithms.ema.half_life"
    assert F.apply_override(data, "seed=") == "seed"
    assert F.apply_override(data, "name=a: b: c") == "name"  # not YAML: the text itself
    assert F.apply_override(data, "tags=[1, x]") == "tags"
    assert F.apply_override(data, "eq=a=b") == "eq"
    assert data == {
        "optimizer": {"lr": 0.005},
        "algorithms": {"ema": {"half_life": "10ba"}},
        "seed": None,
        "name": "a: b: c",
        "tags": [1, "x"],
        "eq": "a=b",
    }


@pytest.mark.parametrize(
    "item, message",
    [
        ("epochs", "expected KEY=VALUE, got 'epochs'"),
        ("=5", "expected KEY=VALUE with a dotted field name as KEY (e.g. optimizer.lr=0.1); got '=5'"),
        ("a..b=1", "expected KEY=VALUE with a dotted field name as KEY (e.g. optimizer.lr=0.1); got 'a..b=1'"),
        ("1a=1", "expected KEY=VALUE with a dotted field name as KEY (e.g. optimizer.lr=0.1); got '1a=1'"),
    ],
)
def test_a_malformed_set_item_is_the_flag_s_error(item, message):
    e = err(F.apply_override, {}, item)
    assert (e.field, e.message, e.source) == ("--set", message, None)


def test_a_bad_value_inside_a_set_item_names_its_key_and_the_flag():
    e = err(F.apply_override, {}, "algorithms={a: 1, a: 2}")
    assert (e.field, e.source) == ("algorithms.a", "--set") and e.message.startswith("given twice")
    e = err(F.apply_override, {}, "x=&a [*a]")
    assert (e.field, e.source) == ("x", "--set") and "alias inside its own anchor" in e.message


def test_overridden_says_which_errors_a_set_key_caused():
    def error(name):
        return ConfigError(name, "m")

    keys = ["optimizer.lr", "algorithms"]
    assert F.overridden(error("optimizer.lr"), keys)
    assert F.overridden(error("algorithms.mixup.alpha"), keys) and F.overridden(error("algorithms[0]"), keys)
    assert F.overridden(error("optimizer"), keys)  # the mapping that holds it
    assert not F.overridden(error("optimizer.lrx"), keys) and not F.overridden(error("epochs"), keys)
    assert not F.overridden(error(""), keys) and not F.overridden(error("optimizer.lr"), [])
