"""How much host memory a dataset may take, and the refusal of one that would not fit (a
``ConfigError`` on ``dataset.image_size`` that says what to lower)."""

from __future__ import annotations

import os

import numpy as np

from effsearch.config import ConfigError

MEMORY_SHARE = 0.8


def memory_limit() -> int:
    """Bytes of host memory a dataset may take: 80% of what is available now."""
    return int(MEMORY_SHARE * _available_memory())


def _available_memory() -> int:
    # MemAvailable counts the page cache the kernel can drop; SC_AVPHYS_PAGES (MemFree) does not,
    # and on a machine that has read big files it is a fraction of what a process can get.
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_fits(count: int, shape: tuple[int, ...], streams: bool = False) -> None:
    """Refuse ``count`` uint8 images of ``shape`` (C,H,W) that would not fit in memory. ``streams``:
    the source is a disk cache that ``loader: ffcv`` can stream its training images from."""
    need, limit = count * int(np.prod(shape)), memory_limit()
    if need > limit:
        ffcv = ", or loader: ffcv (it streams the training images from disk)" if streams else ""
        raise ConfigError(
            "dataset.image_size",
            f"{count:,} images of {'x'.join(map(str, shape))} take {human_bytes(need)} "
            f"in memory, more than the {human_bytes(limit)} this machine can give them "
            f"({MEMORY_SHARE:.0%} of its available memory): lower dataset.image_size (memory grows "
            f"with its square) or dataset.data_fraction{ffcv}",
        )


def human_bytes(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
