"""The on-disk cache of tokenized text: ``cached`` returns what ``build`` makes (token arrays, the
trained tokenizer, a few facts), from ``CACHE/KEY/`` when it is there and whole, else built and
written there, so the second run and every study worker load a tokenized set in about a second.

KEY hashes what the content depends on (the caller's ``key``: the source's identity, the columns,
the split settings the tokenizer's training split depends on, the tokenizer's settings, the
length). ``meta.json`` records the key and each file's SHA-256; a folder whose files do not match
it (damaged, edited, cut short) is rebuilt, with one warning. Nothing is written until ``build``
returned: input it refuses leaves the cache as it was. The folder and its lock come from
``cachefolder``, as every cache's do, so input refused once the tokens are written (a language
model's windows longer than its held-out stream) leaves none either (``removed_on_refusal``). A
folder is written aside and renamed into place, so a crash never leaves a half cache under a key.
Language models (packed token streams) use it with arrays of their own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from effsearch.trainer.data.cachefolder import locked

log = logging.getLogger(__name__)

CACHE_FORMAT = 2  # bump when the files or what builds them change: older caches are not read
TOKENIZER = "tokenizer.json"


@dataclass
class Tokenized:
    """Token arrays by name (``train_x``, ...), the tokenizer's JSON, and facts (JSON values)."""

    arrays: dict[str, np.ndarray]
    tokenizer: str
    facts: dict = field(default_factory=dict)
    folder: Path | None = None  # where it is cached (None: not cached, e.g. a read-only data folder)
    built: bool = False  # tokenized by this call (not read from the cache)


def cached(cache: Path, key: dict, build: Callable[[], Tokenized]) -> Tokenized:
    """``build()``'s result for ``key``: read from ``cache`` if there and whole, else built and cached."""
    full = {"format": CACHE_FORMAT, **key}
    name = hashlib.sha256(json.dumps(full, sort_keys=True, default=str).encode()).hexdigest()[:24]
    folder = cache / name
    hit, why = read(folder, full)
    if hit is not None:
        hit.folder = folder
        return hit
    made = build()  # refuses bad input before anything is written
    made.built = True
    if why:
        log.warning("the token cache %s is %s: rebuilding it", folder, why)
    try:
        with locked(cache, name):  # study workers started together: one writes, the others read
            if read(folder, full)[0] is None:
                _write(cache, name, full, made)
        made.folder = folder
    except OSError as e:
        log.warning("cannot cache the tokenized text in %s (%s): keeping it in memory", cache, e)
    return made


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks (a corpus need not fit in memory twice)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read(folder: Path, key: dict) -> tuple[Tokenized | None, str]:
    """(the cache in ``folder``, '') if it is there and whole; else (None, why not: '' if absent)."""
    meta_path = folder / "meta.json"
    if not folder.exists():
        return None, ""
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("key") != json.loads(json.dumps(key, default=str)):
            return None, "stale (made for other data or settings)"
        for file, digest in meta["files"].items():
            if sha256_of(folder / file) != digest:
                return None, f"damaged ({file} does not match its checksum)"
        arrays = {n: np.load(folder / f"{n}.npy", allow_pickle=False) for n in meta["arrays"]}
        return Tokenized(arrays, (folder / TOKENIZER).read_text(), meta["facts"]), ""
    except (OSError, ValueError, KeyError, TypeError) as e:
        return None, f"unreadable ({type(e).__name__}: {e})"


def _write(cache: Path, name: str, key: dict, made: Tokenized) -> None:
    """Write ``made`` into ``cache/name`` (the caller holds the lock): aside first, then renamed."""
    for stale in cache.glob(f".tmp-{name}-*"):  # a writer that crashed (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    tmp = cache / f".tmp-{name}-{os.getpid()}"
    tmp.mkdir()
    try:
        for n, array in made.arrays.items():
            np.save(tmp / f"{n}.npy", array, allow_pickle=False)
        (tmp / TOKENIZER).write_text(made.tokenizer)
        files = [f"{n}.npy" for n in made.arrays] + [TOKENIZER]
        meta = {
            "key": json.loads(json.dumps(key, default=str)),
            "arrays": list(made.arrays),
            "files": {f: sha256_of(tmp / f) for f in files},
            "facts": made.facts,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        folder, old = cache / name, cache / f".old-{name}-{os.getpid()}"
        if folder.exists():  # a damaged cache: moved aside, so the rename below stays atomic
            folder.rename(old)
        tmp.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
