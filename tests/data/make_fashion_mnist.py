"""Write tests/data/fashion-mnist/: a stratified part of Fashion-MNIST for the tests.

The tests that need a real image dataset read this part (400 training and 100 test images a
class, 5,000 in all, ~2 MB), so a fresh clone passes them offline with nothing beside it; the full
dataset stays for benchmarks and studies. The four files are IDX files, gzip-compressed, with the
original names, so the product loads them as it loads the full copy. Deterministic (seed 0,
gzip mtime 0): running it again writes the same bytes.

    python tests/data/make_fashion_mnist.py ../shared/data/fashion-mnist

Fashion-MNIST: Zalando Research (Xiao, Rasul and Vollgraf, 2017), MIT licence,
https://github.com/zalandoresearch/fashion-mnist.
"""

import gzip
import struct
import sys
from pathlib import Path

import numpy as np

PER_CLASS = {"train": 400, "t10k": 100}
OUT = Path(__file__).resolve().parent / "fashion-mnist"


def read(path: Path, offset: int) -> np.ndarray:
    return np.frombuffer(gzip.open(path).read(), np.uint8, offset=offset)


def write(path: Path, header: bytes, body: np.ndarray) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(header + body.tobytes())


def main(src: Path) -> None:
    OUT.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    for split, per in PER_CLASS.items():
        x = read(src / f"{split}-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
        y = read(src / f"{split}-labels-idx1-ubyte.gz", 8)
        keep = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), per, replace=False) for c in range(10)]))
        n = len(keep)
        write(OUT / f"{split}-images-idx3-ubyte.gz", struct.pack(">IIII", 2051, n, 28, 28), x[keep])
        write(OUT / f"{split}-labels-idx1-ubyte.gz", struct.pack(">II", 2049, n), y[keep])
        print(f"{split}: {n} images, {np.bincount(y[keep]).tolist()}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
