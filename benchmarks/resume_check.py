"""A trial checkpointed, its worker SIGKILLed mid-way and the trial resumed by another worker, set
beside two uninterrupted runs of the same config in the same study (its warm starts): how far the
resumed curve is from an uninterrupted one, next to how far two uninterrupted runs are from each
other (a GPU's kernels need not repeat bit for bit; on the CPU both must be 0).

    python benchmarks/resume_check.py --device cuda --out DIR      # gpu_check.sh resume
    python benchmarks/resume_check.py --smoke                       # CPU, synthetic data: a check of this script

Prints what it does and one summary line; writes DIR/resume.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def study_file(folder: Path, device: str, epochs: float, smoke: bool) -> Path:
    """The baseline (trial 0: the one killed) and two warm starts that train the very same way."""
    if smoke:
        base = {
            "dataset": {"name": "synthetic", "synthetic_size": 480, "val_fraction": 0.2, "crop_padding": 0},
            "model": {"name": "tiny-cnn", "width": 8},
            "batch_size": 32,
            "optimizer": {"name": "sgd", "lr": 0.05},
            "schedule": {"name": "constant"},
            "target_accuracy": 0.6,
        }
    else:
        base = yaml.safe_load((ROOT / "configs" / "fashion-mnist-baseline.yaml").read_text())
    base.update(device=device, epochs=epochs)
    # Two warm starts that train alike: the second also measures int8 after training (queued warm
    # starts are distinct configs), which changes nothing before its end.
    d = {
        "name": "resume-check",
        "base": base,
        "n_trials": 3,
        "warm_start": [{}, {"quantize": "int8"}],
        "dedupe": False,
        "max_slowdown": None,
        "space": {"include": ["optimizer"]},
        "checkpoint_every": 0.05 if smoke else 0.5,
        "heartbeat": {"interval": 1, "grace_period": 3, "max_retry": 2},
    }
    path = folder / "resume-check.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def run(path: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "effsearch.cli", "run", str(path)],
        cwd=ROOT,
        env={**os.environ, "TQDM_DISABLE": "1"},
        stdout=open(log, "a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill_mid_trial(proc: subprocess.Popen, storage: str, past: float, limit: float) -> dict:
    """SIGKILL the worker once trial 0 is RUNNING with a checkpoint past epoch ``past``."""
    import optuna
    from optuna.trial import TrialState

    from effsearch.search.store.storage import open_url

    store, deadline = open_url(storage), time.time() + limit
    while time.time() < deadline and proc.poll() is None:
        if "resume-check" in optuna.get_all_study_names(store):
            trials = optuna.load_study(study_name="resume-check", storage=store).get_trials()
            ckpt = trials[0].user_attrs.get("checkpoint") if trials else None  # the study's trial 0, once queued
            if ckpt and trials[0].state == TrialState.RUNNING and ckpt["epoch"] >= past:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return ckpt
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit(f"resume: no checkpoint past epoch {past} within {limit:g} s")


def gap(a: list[dict], b: list[dict]) -> float:
    """The largest validation-accuracy difference between two curves (inf: not the same points)."""
    if [p["epoch"] for p in a] != [p["epoch"] for p in b]:
        return float("inf")
    return max((abs(p["val_accuracy"] - q["val_accuracy"]) for p, q in zip(a, b)), default=0.0)


def compare(storage: str, ckpt: dict) -> dict:
    import optuna

    from effsearch.search.store.storage import open_url

    trials = optuna.load_study(study_name="resume-check", storage=open_url(storage)).get_trials()
    retry = next(t for t in trials if t.system_attrs.get("failed_trial") == 0)
    whole = [t for t in trials if t.user_attrs.get("warm_start")]
    curves = [t.user_attrs.get("history") or [] for t in (retry, *whole)]
    a = retry.user_attrs
    return {
        "device": (a.get("placement") or {}).get("name"),
        "killed_at": ckpt,
        "resumed_from": a.get("resumed_from"),
        "points": len(curves[0]),
        "resumed_vs_whole": gap(curves[0], curves[1]),
        "whole_vs_whole": gap(curves[1], curves[2]) if len(curves) > 2 else None,
        "restore_seconds": a.get("restore_seconds"),
        "segments": a.get("segments"),
        "time_to_target": [t.user_attrs.get("time_to_target") for t in (retry, *whole)],
        "wall_seconds": [t.user_attrs.get("wall_seconds") for t in (trials[0], retry, *whole)],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--epochs", type=float, default=10)
    p.add_argument("--out", type=Path)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args()
    if args.smoke:
        args.device, args.epochs = "cpu", 12
    folder = Path(tempfile.mkdtemp(prefix="resume-check-"))
    path = study_file(folder, args.device, args.epochs, args.smoke)
    storage, log = str(folder / "resume-check.journal"), folder / "run.log"
    print(f"resume: {path}; killing the worker mid-trial 0", flush=True)
    ckpt = kill_mid_trial(run(path, log), storage, args.epochs / 2, 300)
    print(
        f"resume: killed at the checkpoint of epoch {ckpt['epoch']:g} ({ckpt['train_seconds']:.2f} train s); "
        "another worker resumes it",
        flush=True,
    )
    second = run(path, log)
    try:
        code = second.wait(timeout=300)  # a part is bounded: a hung run must not spend the lease
    except subprocess.TimeoutExpired:
        os.killpg(second.pid, signal.SIGKILL)
        code = second.wait()
    if code != 0:
        print(log.read_text()[-3000:])
        raise SystemExit(f"resume: the second run exited {code}")
    facts = compare(storage, ckpt)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "resume.json").write_text(json.dumps(facts, indent=2))
    print(summary(facts), flush=True)
    return 0


def summary(facts: dict) -> str:
    def num(x: object, f: str = ".4f") -> str:
        return format(x, f) if isinstance(x, (int, float)) else "-"

    at = (facts["resumed_from"] or {}).get("epoch")
    exact = "exact" if facts["resumed_vs_whole"] == 0 else "not exact"
    return (
        f"resume ({facts['device']}): resumed from epoch {num(at, 'g')}, curve vs an uninterrupted run: max |d val "
        f"acc| {num(facts['resumed_vs_whole'])} over {facts['points']} points ({exact}); two uninterrupted runs: "
        f"{num(facts['whole_vs_whole'])}; restore {num(facts['restore_seconds'], '.2f')} s, segments "
        f"{facts['segments']}; time to target (resumed, whole, whole) {facts['time_to_target']}"
    )


if __name__ == "__main__":
    sys.exit(main())
