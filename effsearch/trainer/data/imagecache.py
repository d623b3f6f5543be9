"""The on-disk cache of a user's decoded images (imagefolder, hf): ``decoded`` returns the
splits memory-mapped from ``CACHE/KEY/`` (KEY a hash of the source, its files' sizes and mtimes,
and the settings), decoding them into it first when it has not got them; with no cache to write
(a read-only folder, a full disk) it decodes them in memory. ``userdata.py`` says what to decode;
the folder and its lock come from ``cachefolder``, so an image refused while decoding leaves none.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from effsearch.config import ConfigError
from effsearch.trainer.data.cachefolder import locked
from effsearch.trainer.data.decode import Part, decode, plan
from effsearch.trainer.data.memory import check_fits, human_bytes

log = logging.getLogger(__name__)

CACHE_FORMAT = 2  # bump when the cache's files or the decoding change: older caches are not read
CHANNEL_RULE = "L if all grayscale else RGB"  # in the cache key: the mode itself follows from the files


def decoded(
    cache: Path,
    source: Path,
    files: list[tuple[str, os.stat_result]],
    settings: dict,
    image_size: int | None,
    build: Callable[[], tuple[dict[str, Part], int]],
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], int]:
    """The decoded splits (memory-mapped) and class count: from the cache, else built and cached.
    ``build`` lists the images, called only when the cache has not got them."""
    key = _cache_key(source, files, settings)
    folder = cache / key
    hit = _read_cache(folder)
    if hit is not None:
        return hit
    try:
        lock = locked(cache, key)  # study workers started together decode once
    except OSError as e:
        log.warning("cannot cache decoded images in %s (%s): decoding them in memory", cache, e)
        return _in_memory(*build(), image_size)
    with lock:  # an image refused inside leaves no cache folder or lock behind
        hit = _read_cache(folder)
        if hit is not None:
            return hit
        parts, classes = build()
        mode, size = plan(parts, image_size)
        shape = (1 if mode == "L" else 3, size[1], size[0])
        need = sum(len(p.labels) for p in parts.values()) * int(np.prod(shape))
        if shutil.disk_usage(cache).free < need + (256 << 20):  # a full disk under a memory map is a SIGBUS
            log.warning("%s has not %s free for the decoded images: decoding them in memory", cache, human_bytes(need))
            return _in_memory(parts, classes, image_size, (mode, size))
        _write_cache(cache, key, source, settings, parts, classes, (mode, size, shape))
    hit = _read_cache(folder)
    if hit is None:
        raise ConfigError("dataset.path", f"the decoded images written to {folder} cannot be read back")
    return hit


def _cache_key(source: Path, files: list[tuple[str, os.stat_result]], settings: dict) -> str:
    """The hash naming a decoded cache: the source, its files' sizes and mtimes, the settings."""
    digest = hashlib.sha256(
        json.dumps(
            {"format": CACHE_FORMAT, "source": str(source), "channels": CHANNEL_RULE, **settings}, sort_keys=True
        ).encode()
    )
    skip = len(str(source)) + 1  # paths relative to the source (os.path.relpath: 20 us a file)
    for path, st in files:
        digest.update(f"{path[skip:]}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def _write_cache(
    cache: Path, key: str, source: Path, settings: dict, parts: dict[str, Part], classes: int, layout: tuple
) -> None:
    """Decode ``parts`` into ``cache/key`` (the caller holds the lock): written aside, then renamed."""
    mode, size, shape = layout
    folder = cache / key
    for stale in cache.glob(f".tmp-{key}-*"):  # a writer that crashed (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    tmp = cache / f".tmp-{key}-{os.getpid()}"
    tmp.mkdir()
    try:
        outs = {
            s: np.lib.format.open_memmap(tmp / f"{s}_x.npy", mode="w+", dtype=np.uint8, shape=(len(p.labels), *shape))
            for s, p in parts.items()
        }
        decode(parts, mode, size, outs)
        for s, out in outs.items():
            out.flush()
            np.save(tmp / f"{s}_y.npy", parts[s].labels)
        meta = {
            "format": CACHE_FORMAT,
            "source": str(source),
            "settings": settings,
            "mode": mode,
            "classes": classes,
            "counts": {s: len(p.labels) for s, p in parts.items()},
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        del outs
        old = cache / f".old-{key}-{os.getpid()}"
        if folder.exists():  # a damaged cache: moved aside, so the rename below stays atomic
            folder.rename(old)
        tmp.rename(folder)  # all or nothing: a crash never leaves a half cache under the key
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _drop_stale(cache, key, meta)


def _in_memory(
    parts: dict[str, Part], classes: int, image_size: int | None, layout: tuple[str, tuple[int, int]] | None = None
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], int]:
    mode, size = layout or plan(parts, image_size)
    shape = (1 if mode == "L" else 3, size[1], size[0])
    check_fits(sum(len(p.labels) for p in parts.values()), shape)
    outs = {s: np.empty((len(p.labels), *shape), np.uint8) for s, p in parts.items()}
    decode(parts, mode, size, outs)
    return {s: (outs[s], p.labels) for s, p in parts.items()}, classes


def _read_cache(folder: Path) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], int] | None:
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if meta.get("format") != CACHE_FORMAT:
            return None
        found = {
            s: (np.load(folder / f"{s}_x.npy", mmap_mode="r"), np.load(folder / f"{s}_y.npy")) for s in meta["counts"]
        }
        if any(len(x) != n or len(y) != n for (x, y), n in zip(found.values(), meta["counts"].values(), strict=True)):
            return None
        return found, int(meta["classes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _drop_stale(cache: Path, key: str, meta: dict) -> None:
    """Remove the caches of the same source and settings that files changed since have outdated."""
    for other in cache.iterdir():
        if other.name == key or other.name.startswith(".") or not other.is_dir():
            continue
        try:
            them = json.loads((other / "meta.json").read_text())
        except (OSError, ValueError):
            continue
        if them.get("source") == meta["source"] and them.get("settings") == meta["settings"]:
            shutil.rmtree(other, ignore_errors=True)
