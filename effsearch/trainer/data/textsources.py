"""Reading text datasets into rows of (text, label, split), each row checked as it is read.

* ``jsonl``: one JSON object a line (``.gz``: gzip); ``csv``: a header row, then one row a record
  (labels that are all integers are read as integers);
* ``hf``: a folder written by ``datasets``' ``save_to_disk`` whose ``dataset.text_column`` holds
  strings (splits ``train``, ``validation``/``valid``/``val``/``dev``, ``test``; a ``ClassLabel`` column
  gives its names, and a split that is -1 throughout, unlabelled, is left out: ``hfdisk``);
* ``package.module:callable``: ``x_train``, ``y_train``, ``x_test``, ``y_test`` (optionally
  ``x_val``, ``y_val``), the x's lists of strings;
* ``text``: plain text files, a language model's documents (``read_text``).

A file's rows may name their split in ``dataset.split_column`` (train, validation or val, test; in
any case); ``text.py`` carves what a source does not give. Bad input is a ConfigError naming the
field and the line: a missing or repeated column, an empty text, a line that is not UTF-8 or not
JSON, a label that is neither a string nor an integer. A lone surrogate in a text is read as
U+FFFD. Language models read the same rows with no label column, and leave out empty texts
(wikitext's blank rows: a document of nothing) where a classifier refuses one.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from effsearch.config import ConfigError
from effsearch.config.fields import quote
from effsearch.trainer.data.hfdisk import load_splits, split_of

log = logging.getLogger(__name__)


@dataclass
class TextRows:
    """Texts with their labels (as the source gives them: strings, integers or booleans; None: not asked
    for) and splits ("train", "val" or "test"; None: the source names none)."""

    source: str  # the file, folder or callable, for messages
    unit: str  # "line" (a file's) or "row" (of a split)
    texts: list[str] = field(default_factory=list)
    labels: list[Any] | None = None
    splits: list[str] | None = None
    lines: list[int] = field(default_factory=list)
    groups: list[Any] | None = None  # each row's group (dataset.group_column); None: not asked for
    empty: int = 0  # empty texts left out (a language model's)

    def where(self, i: int) -> str:
        if self.unit == "line":
            return f"line {self.lines[i]} of {self.source}"
        split = self.splits[i] if self.splits is not None else "train"
        return f"row {self.lines[i]} of the {split} split of {self.source}"


@dataclass(frozen=True)
class Columns:
    """The columns asked for (``label`` None: no labels, as a language model reads text)."""

    text: str
    label: str | None
    split: str | None
    group: str | None = None


# -- one row ---------------------------------------------------------------------------------


def _text(value: Any, cols: Columns, where: str) -> str | None:
    """The text; None for an empty one where a language model reads (``cols.label`` None)."""
    if not isinstance(value, str):
        raise ConfigError(
            "dataset.text_column", f"{where}: {cols.text!r} is a {type(value).__name__}, not a string of text"
        )
    if not value.strip():
        if cols.label is None:
            return None
        raise ConfigError("dataset.text_column", f"{where} has an empty text ({cols.text!r}: {quote(value)})")
    return value


def _read(rows: TextRows, what: str) -> TextRows:
    """``rows`` once read: refused when they hold no text; empty texts left out, told."""
    if not rows.texts:
        raise ConfigError("dataset.path", f"{rows.source} holds no {what}")
    if rows.empty:
        log.info("left out %d empty texts of %s (a language model reads documents)", rows.empty, rows.source)
    _mend_surrogates(rows)
    return rows


_SURROGATE = re.compile("[\ud800-\udfff]")
LINE_END = re.compile("\r\n|\r|\n")  # Unix's, Windows', old Macs'


def _mend_surrogates(rows: TextRows) -> None:
    """A lone surrogate (a JSON escape of half an emoji, ``"\\ud83d"``, common in scraped text) read
    as U+FFFD, with one warning: no tokenizer encodes one to UTF-8 (json.loads joins whole pairs)."""
    mended = [i for i, t in enumerate(rows.texts) if _SURROGATE.search(t)]
    for i in mended:
        rows.texts[i] = _SURROGATE.sub("\ufffd", rows.texts[i])
    if mended:
        log.warning(
            "%d text%s of %s held a lone surrogate (half of an escaped UTF-16 pair, as \\ud83d of an emoji "
            "cut in two), read as U+FFFD; the first: %s",
            len(mended),
            "s" if len(mended) != 1 else "",
            rows.source,
            rows.where(mended[0]),
        )


def _label(value: Any, cols: Columns, where: str) -> Any:
    """A label as given: a string, an integer (a float that is a whole number counts as one), or a
    boolean (``"spam": true``: the classes false, true)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, np.integer | np.bool_):
        value = value.item()
    if not isinstance(value, (str, int)) or value == "":
        raise ConfigError(
            "dataset.label_column",
            f"{where}: label {cols.label!r} is {quote(value)}; a label is a non-empty string, an integer or a boolean",
        )
    return value


def _split(value: Any, cols: Columns, where: str) -> str:
    # "TEST", " Valid": a spreadsheet's or a hand's spelling of a split's name
    name = split_of(value.strip()) if isinstance(value, str) else None
    if name is None:
        raise ConfigError(
            "dataset.split_column",
            f"{where}: {cols.split!r} is {quote(value)}; a split is train, validation (or val, valid, dev) or test "
            "(set dataset.split_column to null to carve the splits instead)",
        )
    return name


def _add(rows: TextRows, record: Mapping[str, Any], line: int, cols: Columns, has_split: bool) -> None:
    where = f"line {line} of {rows.source}"
    if cols.text not in record:
        raise ConfigError("dataset.text_column", f"{where} has no {cols.text!r} (it has {', '.join(map(str, record))})")
    text = _text(record[cols.text], cols, where)
    if text is None:
        rows.empty += 1
        return
    rows.texts.append(text)
    rows.lines.append(line)
    if cols.label is not None:
        if cols.label not in record:
            raise ConfigError(
                "dataset.label_column", f"{where} has no {cols.label!r} (it has {', '.join(map(str, record))})"
            )
        assert rows.labels is not None  # made with the label column
        rows.labels.append(_label(record[cols.label], cols, where))
    if cols.group is not None:
        if cols.group not in record:
            raise ConfigError(
                "dataset.group_column", f"{where} has no {cols.group!r} (it has {', '.join(map(str, record))})"
            )
        assert rows.groups is not None  # made with the group column
        group = record[cols.group]
        rows.groups.append(None if group is None else str(group))  # None: a row carved alone
    if has_split:
        if cols.split not in record:
            raise ConfigError(
                "dataset.split_column",
                f"{where} has no {cols.split!r} but {rows.where(0)} has: name every row's split, or none",
            )
        assert rows.splits is not None and cols.split is not None  # made with the split column
        rows.splits.append(_split(record[cols.split], cols, where))
    elif cols.split is not None and cols.split in record:
        raise ConfigError(
            "dataset.split_column",
            f"{where} has {cols.split!r} but {rows.where(0)} has not: name every row's split, or none",
        )


def _start(source: str, cols: Columns, first: Mapping[str, Any] | None) -> TextRows:
    """Empty rows for ``source``; its rows name their split when the first one does."""
    has_split = cols.split is not None and first is not None and cols.split in first
    return TextRows(
        source,
        "line",
        labels=[] if cols.label is not None else None,
        splits=[] if has_split else None,
        groups=[] if cols.group is not None else None,
    )


# -- files -------------------------------------------------------------------------------------


# A compressed file's first bytes, and how to undo what is not gzip (the one compression read).
_COMPRESSED = {
    b"\x1f\x8b": ("gzip", ""),
    b"\xfd7zXZ\x00": ("xz", "xz -dk"),
    b"BZh": ("bzip2", "bzip2 -dk"),
    b"\x28\xb5\x2f\xfd": ("zstd", "zstd -d"),
}


def _compressed(path: Path, data: bytes) -> ConfigError | None:
    """The error for a file that is not UTF-8 because it is compressed (and not read as gzip)."""
    name, undo = next((v for magic, v in _COMPRESSED.items() if data.startswith(magic)), ("", ""))
    if not name or (name == "gzip" and path.suffix == ".gz"):
        return None
    if name == "gzip":
        return ConfigError("dataset.path", f"{path} looks gzip-compressed: name it {path.name}.gz to have it read")
    return ConfigError(
        "dataset.path",
        f"{path} looks {name}-compressed, and only gzip (.gz) is read: decompress it ({undo} {path.name}), "
        "or compress it with gzip and name it .gz",
    )


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(8)
    except OSError:
        return b""


def _decoded(path: Path) -> str:
    """The file's text (gzip when it ends in .gz); a byte that is not UTF-8 is named by its line."""
    try:
        data = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as e:
        said = ConfigError("dataset.path", f"cannot read {path} ({type(e).__name__}: {e})")
        raise _compressed(path, _head(path)) or said from None  # an .xz named .gz: say so
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if error := _compressed(path, data):
            raise error from None
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ConfigError(
            "dataset.path",
            f"line {line} of {path} is not UTF-8 (byte {data[e.start]:#04x} at column {column}); save the file as UTF-8",
        ) from None
    return text.removeprefix("\ufeff")


def read_jsonl(path: Path, cols: Columns) -> TextRows:
    rows: TextRows | None = None
    # Line ends are "\n", "\r\n" or "\r" (a JSON string holds neither raw): splitlines() also split
    # at U+2028, U+2029 and U+0085, which JSON writers leave raw inside strings (ensure_ascii=False,
    # JavaScript's JSON.stringify).
    for n, line in enumerate(LINE_END.split(_decoded(path)), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError("dataset.path", f"line {n} of {path} is not JSON ({e.msg}, column {e.colno})") from None
        if not isinstance(record, dict):
            raise ConfigError(
                "dataset.path", f"line {n} of {path} is a JSON {type(record).__name__}, not an object of columns"
            )
        rows = rows or _start(str(path), cols, record)
        _add(rows, record, n, cols, rows.splits is not None)
    if rows is None:
        raise ConfigError("dataset.path", f"{path} holds no rows")
    return _read(rows, "text")


def read_csv(path: Path, cols: Columns) -> TextRows:
    """A CSV file with a header; a ``.tsv`` (or ``.tsv.gz``) file's fields are split by tabs, and a
    file whose header holds semicolons and no comma (a spreadsheet's export where the comma is the
    decimal mark) by semicolons."""
    text = _decoded(path)
    header_line = text.split("\n", 1)[0]
    semicolons = ";" in header_line and "," not in header_line
    delimiter = "\t" if ".tsv" in path.suffixes[-2:] else ";" if semicolons else ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = reader.fieldnames or []
    tabbed = delimiter == "," and "\t" in header_line and "," not in header_line
    _check_header(path, header, cols, tabbed)
    rows = _start(str(path), cols, dict.fromkeys(header))
    try:
        for record in reader:
            if delimiter == "\t":
                _one_line_fields(record, reader.line_num, path)
            _fields_as_header(record, header, reader.line_num, path, delimiter)
            _add(rows, record, reader.line_num, cols, rows.splits is not None)
    except csv.Error as e:
        raise ConfigError("dataset.path", f"line {reader.line_num} of {path} is not CSV ({e})") from None
    _read(rows, "text")
    # ASCII digits only: "²" and "--1" pass str.isdigit() but not int()
    if rows.labels and all(isinstance(v, str) and re.fullmatch("-?[0-9]+", v.strip()) for v in rows.labels):
        _one_spelling(rows)
        rows.labels = [int(v) for v in rows.labels]  # CSV has no types: integer labels sort as numbers
    return rows


def _one_spelling(rows: TextRows) -> None:
    """Integer labels spelt two ways ("1" and "01") would be one class: refused, naming both."""
    first: dict[int, int] = {}
    for i, v in enumerate(rows.labels or []):
        j = first.setdefault(int(v), i)
        if rows.labels is not None and rows.labels[j].strip() != v.strip():
            raise ConfigError(
                "dataset.label_column",
                f"labels {rows.labels[j]!r} ({rows.where(j)}) and {v!r} ({rows.where(i)}) are the same integer: "
                "write each class one way",
            )


def _check_header(path: Path, header: Sequence[str], cols: Columns, tabbed: bool) -> None:
    """Each column the config reads is in the header once (csv keeps a repeated one's last field)."""
    for name in (cols.text, cols.label, cols.split, cols.group):
        if name is not None and header.count(name) > 1:
            at = ", ".join(str(i + 1) for i, h in enumerate(header) if h == name)
            raise ConfigError(
                "dataset.path",
                f"the header of {path} names the column {name!r} more than once (columns {at}): "
                "rename or drop all but one",
            )
    for name, fld in (
        (cols.text, "dataset.text_column"),
        (cols.label, "dataset.label_column"),
        (cols.group, "dataset.group_column"),
    ):
        if name is not None and name not in header:
            spaced = next((h for h in header if h.strip() == name), None)  # `text, label`: a space after the comma
            said = f"{path} has no column {name!r} (its header: {', '.join(map(repr, header)) or 'none'})"
            if spaced:
                said += f"; {spaced!r} holds spaces: set {fld}: {spaced!r}, or take them out of the header"
            elif tabbed:
                tsv = path.name.replace(".csv", ".tsv") if ".csv" in path.name else f"{path.name}.tsv"
                said += f"; its header holds tabs and no comma: it looks tab-separated, so name it {tsv}"
            raise ConfigError(fld, said)


def _one_line_fields(record: dict, n: int, path: Path) -> None:
    """A tab-separated field holding a tab comes from a field opening with a double quote that ran
    on to the next quote, over the rows after it (a file written with no quoting). A line break
    alone is a quoted text's own (a CSV writer quotes a text that holds one)."""
    values = [v for v in record.values() if isinstance(v, str)] + list(record.get(None) or [])
    if not any("\t" in v for v in values):
        return
    first = n - sum(len(LINE_END.findall(v)) for v in values)
    raise ConfigError(
        "dataset.path",
        f"line {first} of {path} has a field holding a tab"
        + (f" (it runs on to line {n})" if n > first else "")
        + ': in a tab-separated file a field that opens with a double quote (") runs on to the next quote, '
        "over tabs and lines. "
        "Write the file with a CSV writer (Python's csv.writer(f, delimiter='\\t'), pandas' "
        "to_csv(sep='\\t')), which quotes such a text, or take the tabs out of the texts",
    )


def _fields_as_header(record: dict, header: Sequence[str], n: int, path: Path, delimiter: str) -> None:
    """A row with more fields than the header (csv puts the rest under None: an unquoted comma in a
    text) or fewer (None values) is refused naming its line: read as it is, its label would be a
    piece of its text, or a field left out."""
    extra = record.get(None)
    short = None in record.values()
    if not extra and not short:
        return
    count = len(header) + len(extra or []) - sum(v is None for v in record.values())
    said = f"line {n} of {path} has {count} field{'s' if count != 1 else ''}, and its header {len(header)}"
    raise ConfigError("dataset.path", said + (f': quote a text that holds {delimiter!r} ("a, b")' if extra else ""))


def read_text(path: Path) -> TextRows:
    """Plain text as a language model's documents: a file's paragraphs (lines between blank ones, a
    line of spaces blank too), or each file of a folder (its files in sorted order, ``.gz`` read as
    gzip), whole; hidden files and folders (``.git``, ``.DS_Store``) skipped, as an image folder's.
    Windows' and old Macs' line ends read as ``\\n`` (a file written on Windows had been one paragraph)."""
    rows = TextRows(str(path), "line")
    for file in files_of(path):
        text = LINE_END.sub("\n", _decoded(file))
        if path.is_dir():
            if text.strip():
                rows.texts.append(text)
                rows.lines.append(1)
            continue
        block: list[str] = []
        for n, line in enumerate([*text.split("\n"), ""], 1):
            if line.strip():
                block.append(line)
            elif block:
                rows.texts.append("\n".join(block))
                rows.lines.append(n - len(block))
                block = []
    if not rows.texts:
        raise ConfigError("dataset.path", f"{path} holds no text")
    return rows


def files_of(path: Path) -> list[Path]:
    """``path`` itself, or a folder's files in sorted order, hidden files and folders (``.git``,
    ``.DS_Store``) skipped."""
    if path.is_file():
        return [path]
    return sorted(
        p for p in path.rglob("*") if p.is_file() and not any(n.startswith(".") for n in p.relative_to(path).parts)
    )


# -- hf and an import path: named splits -------------------------------------------------------


def _parts(source: str, parts: Mapping[str, tuple[Sequence[Any], Sequence[Any] | None]], cols: Columns) -> TextRows:
    """Rows from named splits of texts and labels (None: no labels)."""
    if cols.group is not None:
        raise ConfigError("dataset.group_column", f"applies to jsonl and csv files; {source} has no such column")
    rows = TextRows(source, "row", labels=[] if cols.label is not None else None, splits=[])
    for split, (texts, labels) in parts.items():
        if labels is not None and len(labels) != len(texts):
            raise ConfigError(
                "dataset.label_column", f"the {split} split of {source} has {len(texts)} texts but {len(labels)} labels"
            )
        for i, t in enumerate(texts):
            where = f"row {i} of the {split} split of {source}"
            text = _text(t, cols, where)
            if text is None:
                rows.empty += 1
                continue
            rows.texts.append(text)
            rows.lines.append(i)
            assert rows.splits is not None
            rows.splits.append(split)
            if rows.labels is not None and labels is not None:
                rows.labels.append(_label(labels[i], cols, where))
    return _read(rows, "text")


def holds_texts(x: Any) -> bool:
    """``x`` is a sequence of strings (an import path's texts), not an array of images."""
    if isinstance(x, np.ndarray):
        return x.ndim == 1 and x.dtype.kind in "UO" and len(x) > 0 and isinstance(x[0], str)
    return isinstance(x, (list, tuple)) and len(x) > 0 and isinstance(x[0], str)


def from_arrays(arrays: Mapping[str, Any], source: str, cols: Columns) -> TextRows:
    """An import path's ``x_train``, ``y_train``, ``x_test``, ``y_test`` (and ``x_val``, ``y_val``)."""
    parts: dict[str, tuple[Sequence[Any], Sequence[Any] | None]] = {}
    for split, key in (("train", "train"), ("val", "val"), ("test", "test")):
        if f"x_{key}" not in arrays:
            continue
        x, y = arrays[f"x_{key}"], arrays.get(f"y_{key}")
        if not holds_texts(x) and len(x):
            raise ConfigError("dataset.name", f"x_{key} of {source} is not a list of strings (x_train is: text)")
        parts[split] = (list(x), None if y is None else list(np.asarray(y).tolist()))
    return _parts(source, parts, cols)


def hf_text_column(root: Path, column: str) -> bool:
    """Whether the saved dataset at ``root`` has a column ``column`` of strings (its train split's
    features, read from the files ``save_to_disk`` writes beside the data: nothing imported; or
    the schema of its first parquet file)."""
    from effsearch.trainer.data.hfdisk import parquet_files

    files = parquet_files(root) if root.exists() else None
    if files:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq

            field = pq.read_schema(files[0]).field(column)
        except (ImportError, KeyError, OSError, ValueError, pa.ArrowException):
            return False  # the load says what is wrong
        return pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
    for info in (root / "train" / "dataset_info.json", root / "dataset_info.json"):
        try:
            features = json.loads(info.read_text()).get("features") or {}
        except (OSError, ValueError):
            continue
        feature = features.get(column) or {}
        return feature.get("_type") == "Value" and feature.get("dtype") in ("string", "large_string")
    return False


def read_hf(root: Path, cols: Columns) -> TextRows:
    found = load_splits(root, "'hf'", cols.label)
    import datasets  # present: load_splits refused its absence

    parts: dict[str, tuple[Sequence[Any], Sequence[Any] | None]] = {}
    for split, ds in found.items():
        name = {"val": "validation"}.get(split, split)
        for column, fld in ((cols.text, "dataset.text_column"), (cols.label, "dataset.label_column")):
            if column is not None and column not in ds.column_names:
                raise ConfigError(
                    fld,
                    f"the {name} split of {root} has no column {column!r}; its columns: {', '.join(ds.column_names)}",
                )
        labels = None
        if cols.label is not None:
            feature, labels = ds.features[cols.label], list(ds[cols.label])
            if isinstance(feature, datasets.ClassLabel):
                missing = next((i for i, v in enumerate(labels) if v < 0), None)
                if missing is not None:
                    raise ConfigError(
                        "dataset.label_column",
                        f"row {missing} of the {name} split of {root} has no label ({cols.label!r} is "
                        f"{labels[missing]}, datasets' mark for none); drop such rows "
                        f"(ds.filter(lambda r: r[{cols.label!r}] >= 0)) and save again",
                    )
                labels = [feature.int2str(int(v)) for v in labels]
        parts[split] = (list(ds[cols.text]), labels)
    return _parts(str(root), parts, cols)
