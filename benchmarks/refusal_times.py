"""How long `effsearch` takes to refuse each kind of bad input, before and after a change.

Each case is the real command in a fresh process (its wall time from start to exit 2, imports
included), run in a fresh folder, in two checkouts each with its own ``.venv``: ``--before`` (e.g.
a worktree of the commit a change started from) and ``--after`` (default: this checkout). The
two alternate (before, after; then after, before) ``--repeat`` times after one untimed run each
(Python's first run of a checkout compiles its bytecode); the table gives the medians, the load
at the start and end, the date and the machine.

    git worktree add ../before <commit> && (cd ../before && uv sync --frozen --all-extras)
    flock /work/locks/measure uv run --frozen python benchmarks/refusal_times.py --before ../before
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

TINY = {"dataset": {"name": "synthetic"}, "epochs": 1, "device": "cpu"}
STUDY = {"name": "s", "base": TINY, "n_trials": 2}


def _yaml(path: Path, data: dict) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _images(folder: Path) -> Path:
    """Two classes of six 16x16 PNGs, and one file that is no PNG."""
    rng = np.random.default_rng(0)
    for name in ("cats", "dogs"):
        (folder / name).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(folder / name / f"{i}.png")
    (folder / "dogs" / "broken.png").write_bytes(b"not a png")
    return folder


def _storage(path: Path) -> None:
    """A journal holding one finished-less study, for the dashboard to open."""
    import optuna

    from effsearch.search.store.storage import open_url

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name="s", storage=open_url(str(path)), directions=["minimize", "maximize"])


def _setup_model(d: Path) -> list[str]:
    _yaml(d / "c.yaml", {**TINY, "model": {"name": "no_such_module:cnn"}})
    return ["train", "c.yaml", "--out", "run"]


def _setup_npz(d: Path) -> list[str]:
    x = np.zeros((30, 12, 12, 3), np.uint8)
    np.savez(d / "d.npz", x_train=x[:20], y_train=np.arange(20) % 2, x_test=x[20:])
    _yaml(d / "c.yaml", {**TINY, "dataset": {"name": "npz", "path": "d.npz"}})
    return ["train", "c.yaml", "--out", "run"]


def _setup_folder(d: Path) -> list[str]:
    _images(d / "pets")
    _yaml(d / "c.yaml", {**TINY, "dataset": {"name": "imagefolder", "path": "pets"}})
    return ["train", "c.yaml", "--out", "run"]


def _setup_study(d: Path) -> list[str]:
    _yaml(d / "s.yaml", {**STUDY, "pruner": {"name": "moasha", "eta": 0}})
    return ["run", "s.yaml"]


def _setup_dashboard(d: Path) -> list[str]:
    _storage(d / "s.journal")
    return ["dashboard", "s", "--storage", "s.journal", "--host", "no-such-host.invalid"]


# (what is refused, how to make it: the command's arguments, the target in seconds)
CASES = [
    ("a model import path that does not exist", _setup_model, 3.0),
    ("own data: an npz without y_test", _setup_npz, 5.0),
    ("own data: an image folder with a damaged PNG", _setup_folder, 5.0),
    ("a bad study file (pruner.eta 0)", _setup_study, 3.0),
    ("dashboard --host that does not resolve", _setup_dashboard, 2.0),
]


def refusal_seconds(python: Path, args: list[str], folder: Path) -> float:
    """Wall seconds of one refused command (it must exit 2)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["EFFSEARCH_DATA_DIR"] = str(folder / "data")
    env["TQDM_DISABLE"] = "1"
    t = time.perf_counter()
    p = subprocess.run([str(python), "-m", "effsearch.cli", *args], cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if p.returncode != 2:
        raise SystemExit(f"{python}: {args} exited {p.returncode}, not 2:\n{p.stderr[-2000:]}")
    return seconds


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="checkout to compare against (with its .venv)")
    ap.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sides = {"before": args.before.resolve() / ".venv/bin/python", "after": args.after.resolve() / ".venv/bin/python"}
    started = load()
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folders = []
        for i, (_, setup, _) in enumerate(CASES):
            folder = Path(tmp) / f"case{i}"
            folder.mkdir()
            folders.append((folder, setup(folder)))
        for python in sides.values():  # untimed: the first run of a checkout compiles its bytecode
            for folder, command in folders:
                refusal_seconds(python, command, folder)
        for rep in range(args.repeat):
            order = list(sides) if rep % 2 == 0 else list(reversed(sides))
            for (name, _, _), (folder, command) in zip(CASES, folders):
                for side in order:
                    times.setdefault((name, side), []).append(refusal_seconds(sides[side], command, folder))
    print(
        f"{datetime.date.today()}, {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), "
        f"load {started} at the start, {load()} at the end; median of {args.repeat}, alternated"
    )
    print("| refused input | command | before (s) | after (s) | target |")
    print("| --- | --- | --- | --- | --- |")
    for (name, _, target), (_, command) in zip(CASES, folders):
        before, after = (statistics.median(times[(name, s)]) for s in ("before", "after"))
        print(f"| {name} | `effsearch {' '.join(command)}` | {before:.1f} | **{after:.1f}** | < {target:g} |")


if __name__ == "__main__":
    main()
