"""Train configurations sampled from a study's space, small and on the CPU, and report every
one that crashes: the space offers only what trains.

    uv run python benchmarks/space_sweep.py                          # the GPU study's space, 30 configs
    uv run python benchmarks/space_sweep.py studies/quickstart.yaml --n 40 --seed 3 --as-is
    uv run python benchmarks/space_sweep.py studies/debian-topics.yaml --each   # every dimension once

``--each``: instead of random configurations, the base with one searched dimension changed at a
time (a switch on, each other choice, a range's ends; an algorithm's parameter with the algorithm
on), every one the space's gates let in: each dimension is trained at least once.

By default the machine is taken for a GPU with bf16 and torch.compile (``--as-is``: this machine),
so the GPU space's combinations are sampled; each then trains here in fp32 on a sliver of its
data, compile through Dynamo's eager backend (inductor needs a GPU or a C++ toolchain that
builds). A config that diverges is fine; an exception or a "failed" run is a crash. Exit 1 if
any crashed. Found so far: compile + SWA (EffModel's copy), Dynamo's cache across a worker's
compile trials, K-FAC's eigh on a rank-deficient factor (docs/benchmarks.md). LowPrecisionLayerNorm
is never trained here (fp32 on a CPU refuses it): its surgery is checked by tests/trainer/test_unseen_models.py.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_space(path: Path, as_gpu: bool):
    import torch

    from effsearch.config.machine import Machine
    from effsearch.search.study import studyfile

    if not as_gpu:
        return studyfile.load(path)
    gpu = Machine("cuda", bf16=True, ffcv=False, compile=True, gpus=1)
    saved = torch.cuda.is_available, torch.cuda.is_bf16_supported
    torch.cuda.is_available, torch.cuda.is_bf16_supported = (lambda: True), (lambda *a, **k: True)
    try:  # the study file's own checks ask torch whether its device exists
        return studyfile.load(path, machine=gpu)
    finally:
        torch.cuda.is_available, torch.cuda.is_bf16_supported = saved


def on_gpu(d: dict, as_gpu: bool) -> dict:
    """A sampled config as the pretended GPU machine runs it: a base of ``device: cpu`` is checked on
    cuda (the space offered it that machine's precisions; on cpu the rules refuse them)."""
    return {**d, "device": "cuda"} if as_gpu and d.get("device") == "cpu" else d


def here(d: dict, data_fraction: float, max_epochs: float, max_batch: int) -> dict:
    """A sampled config made small enough to train on 2 CPU cores in seconds."""
    d = dict(d, device="cpu", precision="fp32", loader="torch")
    d["dataset"] = {**d.get("dataset", {}), "data_fraction": data_fraction, "val_subset": 0.05}
    d["epochs"] = min(float(d.get("epochs", 1)), max_epochs)
    d["batch_size"] = min(int(d.get("batch_size", 64)), max_batch)
    return d


def sweep(
    path: Path,
    n: int,
    seed: int,
    as_gpu: bool = True,
    data_fraction: float = 0.006,
    max_epochs: float = 3.0,
    max_batch: int = 64,
    data_root=None,
    out=sys.stdout,
) -> list[str]:
    """Train ``n`` sampled configs; returns one line per crash."""
    import optuna
    import torch

    spec = load_space(path, as_gpu)
    real = torch.compile
    torch.compile = lambda m, mode=None, **kw: real(m, backend="eager")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=optuna.samplers.RandomSampler(seed=seed))
    crashes = []
    try:
        for i in range(n):
            sampled = on_gpu(spec.space.sample(study.ask()), as_gpu)
            made = here(sampled, data_fraction, max_epochs, max_batch)
            algos = ",".join(k for k, v in (made.get("algorithms") or {}).items() if v is not None)
            what = (
                f"{made['optimizer']['name']} bs {made['batch_size']} compile {made.get('compile')} "
                f"channels_last {made.get('channels_last')} sparsity {made.get('sparsity', {}).get('target', 0):.2f} "
                f"accumulate {made.get('accumulate', 1)} [{algos}]"
            )
            _train_one(str(i), sampled, made, "sampled", what, data_root, crashes, out)
    finally:
        torch.compile = real
    return crashes


def _train_one(label: str, sampled: dict, made: dict, how: str, what: str, data_root, crashes: list, out) -> None:
    """Check ``sampled`` as the space gave it, train ``made`` (it made small), say how it went; a
    crash (the rules refuse what the space gave, or a run that neither completes nor diverges) joins
    ``crashes``."""
    from effsearch.config import ConfigError, TrainConfig
    from effsearch.trainer.training import train

    try:
        TrainConfig.from_dict(sampled)
    except ConfigError as e:  # the space gave what the rules refuse: the space's crash
        crashes.append(f"{label}: refused as {how}: {e}")
        print(crashes[-1], file=out, flush=True)
        return
    try:
        cfg = TrainConfig.from_dict(made)
    except ConfigError as e:  # made small, a rule refuses it (fewer epochs than a schedule needs)
        print(f"{label}: skipped: made small, it is refused: {e}", file=out, flush=True)
        return
    t = time.perf_counter()
    try:
        r = train(cfg, data_root=data_root, progress=False, test=False)
        line = f"{label}: {r.status} {time.perf_counter() - t:.1f}s" + (f" {what}" if what else "")
        if r.status not in ("completed", "diverged"):
            crashes.append(f"{line}: {r.reason}")
    except Exception as e:
        line = f"{label}: {type(e).__name__}: {str(e)[:300]}" + (f" ({what})" if what else "")
        crashes.append(line + "\n" + traceback.format_exc(limit=4))
    print(line, file=out, flush=True)


def _opened(d, cfg: dict, by_name: dict) -> dict | None:
    """``cfg``, or it with one parent dimension set so that ``d``'s gate lets it in (None: none does)."""
    if d.when is None or d.when(cfg):
        return cfg
    for parent in (by_name[p] for p in d.parents if p in by_name):
        for choice in parent.choices:
            trial = copy.deepcopy(cfg)
            parent.apply(trial, choice)
            if (parent.when is None or parent.when(trial)) and d.when(trial):
                return trial
    return None


def one_at_a_time(space) -> list[tuple[str, dict]]:
    """(label, config dict) for each searched dimension's other values, one changed at a time from
    the base (an algorithm's parameter with its switch on; a dimension whose gate needs a parent,
    with that parent set), where the space's gates let it in."""
    by_name = {d.name: d for d in space.dims}
    out = []
    for d in space.dims:
        if d.name not in space.active:
            continue
        base = d.read(space.base.to_dict())
        values = [c for c in d.choices if c != base][:6] if d.kind == "cat" else [d.high if base != d.high else d.low]
        for value in values:
            cfg: dict | None = space.base.to_dict()
            switch = by_name.get(f"algorithms.{d.extra['algorithm']}") if "param" in d.extra else None
            if switch is not None:
                cfg = _opened(switch, cfg, by_name)
                if cfg is None:
                    break
                switch.apply(cfg, True)
            cfg = _opened(d, cfg, by_name)
            if cfg is None:
                break  # gated out for this base: not a dimension this base can search
            d.apply(cfg, int(value) if d.kind == "int" else value)
            out.append((f"{d.name}={value}", cfg))
    return out


def sweep_each(
    path: Path,
    as_gpu: bool = True,
    data_fraction: float = 1.0,
    max_epochs: float = 2.0,
    max_batch: int = 64,
    data_root=None,
    out=sys.stdout,
) -> list[str]:
    """Train the base with each searched dimension changed once (``one_at_a_time``); crashes."""
    import torch

    spec = load_space(path, as_gpu)
    real = torch.compile
    torch.compile = lambda m, mode=None, **kw: real(m, backend="eager")
    crashes = []
    try:
        for label, sampled in one_at_a_time(spec.space):
            sampled = on_gpu(sampled, as_gpu)
            made = here(sampled, data_fraction, max_epochs, max_batch)
            _train_one(label, sampled, made, "offered", "", data_root, crashes, out)
    finally:
        torch.compile = real
    return crashes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", nargs="?", type=Path, default=ROOT / "studies" / "fashion-mnist-gpu.yaml")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--as-is", action="store_true", help="sample the space this machine gets (default: a GPU's)")
    ap.add_argument("--data-fraction", type=float, default=0.006)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--each", action="store_true", help="every searched dimension once, from the base")
    args = ap.parse_args()
    if args.each:
        crashes = sweep_each(args.study, not args.as_is, args.data_fraction, data_root=args.data_dir)
        print(f"\neach dimension of {args.study}'s space once: {len(crashes)} crashed")
    else:
        crashes = sweep(args.study, args.n, args.seed, not args.as_is, args.data_fraction, data_root=args.data_dir)
        print(f"\n{args.n} configs of {args.study}'s space, seed {args.seed}: {len(crashes)} crashed")
    for c in crashes:
        print(c)
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
