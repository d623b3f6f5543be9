"""First-step seconds of consecutive compile trials in one worker process, with the compile state
as a worker leaves it between trials, and as it was before.

On an H100 one configuration's first step took 4.0 s as its worker's first compile trial and
77.9 s as its fourth (docs/benchmarks.md, "GPU study"). A worker now calls
``trainer.training.fresh_compile_state`` before each trial (Dynamo's and Inductor's in-process
caches reset). Arms, each a fresh process, one after another:

- ``after``: as a worker runs trials now (the reset before each);
- ``before``: as the GPU study ran (only the loop's own ``torch._dynamo.reset()`` before each compile);
- ``none``: no reset at all (a later trial may reuse an earlier one's graph: no compile paid);
- ``process``: each trial in a process of its own (the floor a reset can reach; costs a start each).

The trials: a configuration (``--config``, compile on; default the study's slow trial,
benchmarks/data/gpu_slow_trial.yaml, whose cold compile took 235 s on an H200) first, variants of
it next, and itself again last, so its first step is read as the worker's first and last trial.
Each arm stops at ``--arm-seconds`` even mid-compile.
Before the arms a warm-up process compiles each configuration once into an Inductor disk cache the
arms share (a worker's disk cache is warm after its first trials): the arms differ only in the
in-process state.

    python benchmarks/compile_reset.py --device cuda --trials 5 --arms after before --out DIR
    python benchmarks/compile_reset.py --device cuda --config configs/fashion-mnist-fast.yaml  # cheaper compiles
    python benchmarks/compile_reset.py --smoke          # CPU, Dynamo's eager backend: a check of this script

Prints a line per trial and a summary line per arm; with --out, appends each trial to
DIR/compile_reset.jsonl as it ends (a call cut short keeps what it measured).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOW = ROOT / "benchmarks" / "data" / "gpu_slow_trial.yaml"
# Variants a worker's later trials might be: a width, a batch size, other algorithms. SqueezeExcite's
# min_channels 16: at its default 128 it adds no block to tiny-cnn at these widths (a rule refuses it).
SE = {"squeeze_excite": {"min_channels": 16}}
VARIANTS = [
    {"model.width": 16},
    {"batch_size": 512, "algorithms": {"cutmix": {}, **SE}},
    {"model.width": 48, "sparsity.target": 0.0},
]


def configs(trials: int, smoke: bool) -> list[tuple[str, dict]]:
    """(label, dotted overrides of the slow config) for each trial: A, B, C, D, ..., A."""
    middle = [
        (chr(ord("B") + i % len(VARIANTS)) + ("" if i < len(VARIANTS) else str(i)), VARIANTS[i % len(VARIANTS)])
        for i in range(max(0, trials - 2))
    ]
    out = [("A", {})] + middle + ([("A", {})] if trials > 1 else [])
    if smoke:  # no data to find, no GPU: digits-sized synthetic images on the CPU
        tiny = {
            "device": "cpu",
            "precision": "fp32",
            "dataset.name": "synthetic",
            "dataset.synthetic_size": 256,
            "batch_size": 32,
            "sparsity.target": 0.0,
            "algorithms": SE,
        }
        out = [(label, {**changes, **tiny}) for label, changes in out]
    return out


def one_arm(
    arm: str, plan: list[tuple[int, str, dict]], epochs: float, smoke: bool, device: str, config: Path
) -> list[dict]:
    """Train ``plan``'s trials (number, label, changes) in this process as ``arm`` says; a record each."""
    import torch

    from effsearch.config import TrainConfig, read_yaml
    from effsearch.config.fields import set_path
    from effsearch.trainer import training

    if smoke:  # inductor needs a C++ toolchain here; Dynamo's caches (what is reset) are the same
        real = torch.compile
        torch.compile = lambda m, mode=None, **kw: real(m, backend="eager")  # type: ignore[assignment]
    if arm in ("before", "none"):
        training.fresh_compile_state = lambda: None  # the worker's reset, as before it existed
    if arm == "none":
        torch._dynamo.reset = lambda: None  # the loop's own reset too
    base = read_yaml(config, "")
    records = []
    for number, label, changes in plan:
        d = {**base, "device": device, "epochs": epochs, "compile": True}
        for key, value in changes.items():
            set_path(d, key, value)
        training.fresh_compile_state()  # what the worker does before each trial (a no-op in before/none)
        t = time.perf_counter()
        r = training.train(TrainConfig.from_dict(d), progress=False, test=False)
        rec = {
            "arm": arm,
            "trial": number,
            "config": label,
            "first_step": r.final.compile_seconds,
            "train_seconds": r.final.train_seconds,
            "wall": time.perf_counter() - t,
            "status": r.status,
        }
        records.append(rec)
        print(json.dumps(rec), flush=True)
    return records


def run_arm(arm: str, args: argparse.Namespace) -> list[dict]:
    """``arm`` in fresh processes (one, or one a trial for ``process``) on the shared, warmed Inductor
    disk cache (``warm``), so that arms differ only in the in-process state a reset clears; each
    trial printed, and appended to --out, as it ends."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": args.cache}
    numbers = [str(i) for i in range(args.trials)]
    if arm == "warm":  # each distinct configuration once, untimed: the disk cache every arm reads
        labels = {label: i for i, (label, _) in reversed(list(enumerate(configs(args.trials, args.smoke))))}
        numbers = [str(i) for i in sorted(labels.values())]
    calls = [numbers] if arm != "process" else [[n] for n in numbers]
    records: list[dict] = []
    limit = args.warm_seconds if arm == "warm" else args.arm_seconds
    deadline = time.monotonic() + limit
    for only in calls:
        cmd = [
            sys.executable,
            __file__,
            "--inner",
            {"process": "after", "warm": "before"}.get(arm, arm),
            "--trials",
            str(args.trials),
            "--only",
            ",".join(only),
            "--epochs",
            str(args.epochs),
            "--device",
            args.device,
            "--config",
            str(args.config),
        ]
        # stderr to a file, not a pipe: a child that logs much (Inductor, TORCH_LOGS) would fill a
        # pipe nobody reads and hang; a timer kills the child at the deadline even while it is silent
        # (a cold compile prints nothing for minutes).
        with tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(
                cmd + (["--smoke"] if args.smoke else []), env=env, stdout=subprocess.PIPE, stderr=err, text=True
            )
            timer = threading.Timer(max(0.0, deadline - time.monotonic()), proc.kill)
            timer.start()
            assert proc.stdout is not None
            try:
                for line in proc.stdout:  # a trial at a time, as it ends
                    if line.startswith("{"):
                        rec = {**json.loads(line), "arm": arm}
                        records.append(rec)
                        print(
                            f"compile-reset {arm:7s} trial {rec['trial'] + 1} ({rec['config']}): first step "
                            f"{rec['first_step']:.2f} s, wall {rec['wall']:.1f} s, {rec['status']}",
                            flush=True,
                        )
                        if args.out is not None and arm != "warm":
                            with open(args.out / "compile_reset.jsonl", "a") as f:
                                f.write(json.dumps(rec) + "\n")
            finally:
                timer.cancel()
                if time.monotonic() >= deadline:
                    proc.kill()
            code = proc.wait()
            if time.monotonic() >= deadline and code != 0:
                print(f"compile-reset {arm}: stopped at the arm's limit ({limit:g} s)", flush=True)
                break
            if code != 0:
                err.seek(0)
                print(f"compile-reset {arm}: exit {code}: {err.read()[-1500:]}", flush=True)
    return records


def summary(arm: str, records: list[dict]) -> str:
    firsts = [f"{r['first_step']:.1f}" for r in records]
    a = [r for r in records if r["config"] == "A"]
    tail = (
        f"; A as trial 1 {a[0]['first_step']:.1f} s, as trial {a[-1]['trial'] + 1} {a[-1]['first_step']:.1f} s"
        if len(a) > 1
        else ""
    )
    return f"compile-reset {arm}: first-step seconds by trial {', '.join(firsts) or 'none'}{tail}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument(
        "--config", type=Path, default=SLOW, help="the trials' config (compile on); default: the GPU study's slow trial"
    )
    p.add_argument("--epochs", type=float, default=0.1, help="each trial's epochs (its first step is the figure)")
    p.add_argument("--arms", nargs="+", default=["after", "before"], choices=["after", "before", "none", "process"])
    p.add_argument("--arm-seconds", type=float, default=50.0, help="time limit of each arm")
    p.add_argument("--warm-seconds", type=float, help="time limit of the warm-up (default: twice --arm-seconds)")
    p.add_argument("--cold", action="store_true", help="no warm-up: the first arm meets a cold Inductor disk cache")
    p.add_argument("--out", type=Path, help="folder for compile_reset.jsonl and compile_reset.txt")
    p.add_argument("--smoke", action="store_true", help="tiny, on the CPU, Dynamo's eager backend")
    p.add_argument("--inner", help=argparse.SUPPRESS)
    p.add_argument("--only", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.smoke:
        args.device, args.epochs = "cpu", 0.5
    if args.warm_seconds is None:
        args.warm_seconds = 2 * args.arm_seconds
    if args.inner:  # one arm's trials in this process: a JSON line each on stdout
        trials = configs(args.trials, args.smoke)
        plan = [(int(i), *trials[int(i)]) for i in args.only.split(",")]
        one_arm(args.inner, plan, args.epochs, args.smoke, args.device, args.config)
        return 0
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    args.cache = tempfile.mkdtemp(prefix="inductor-")
    if not args.cold:
        warm = run_arm("warm", args)
        print(f"compile-reset warm-up: {len(warm)} configurations compiled once into the shared disk cache", flush=True)
    lines = [summary(arm, run_arm(arm, args)) for arm in args.arms]
    print("\n".join(lines))
    if args.out is not None:
        (args.out / "compile_reset.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
