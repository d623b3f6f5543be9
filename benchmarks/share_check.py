"""Two workers on one GPU: refused (more workers than free GPUs), then allowed with
``share_devices: true``, every trial's time marked as measured on a shared device; the trials'
times set beside the same study's baseline trained alone first (one worker).

    python benchmarks/share_check.py --device cuda --out DIR      # gpu_check.sh share
    python benchmarks/share_check.py --smoke                       # CPU, one fake GPU: a check of this script

Prints what it does and one summary line; writes DIR/share.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def study_file(folder: Path, name: str, device: str, smoke: bool, **changes: object) -> Path:
    if smoke:  # trials of about two seconds: at 320 images one worker could run all four before the other started
        base = {
            "dataset": {"name": "synthetic", "synthetic_size": 4096, "val_fraction": 0.2, "crop_padding": 0},
            "model": {"name": "tiny-cnn", "width": 8},
            "batch_size": 32,
            "epochs": 2,
            "optimizer": {"name": "sgd", "lr": 0.05},
            "schedule": {"name": "constant"},
            "target_accuracy": 0.5,
        }
    else:
        base = {**yaml.safe_load((ROOT / "configs" / "fashion-mnist-baseline.yaml").read_text()), "epochs": 3}
    base["device"] = device
    d = {
        "name": name,
        "base": base,
        "n_trials": 4,
        "max_slowdown": None,
        "warm_start": [{}],
        "dedupe": False,
        "space": {"include": ["optimizer"]},
        **changes,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def effsearch(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "effsearch.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", type=Path)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args()
    env = {**os.environ, "TQDM_DISABLE": "1"}
    if args.smoke:
        args.device, env["EFFSEARCH_FAKE_GPUS"] = "cpu", "1"
    folder = Path(tempfile.mkdtemp(prefix="share-check-"))
    refused = effsearch(
        "run", str(study_file(folder, "share-refused", args.device, args.smoke)), "--workers", "2", env=env
    )
    said = (refused.stderr.strip().splitlines() or [""])[-1]
    print(
        f"share: 2 workers on this machine's one GPU, without share_devices: exit {refused.returncode}: {said}",
        flush=True,
    )
    path = study_file(folder, "share", args.device, args.smoke, share_devices=True)
    allowed = effsearch("run", str(path), "--workers", "2", env=env)
    if allowed.returncode != 0:
        print(allowed.stderr[-3000:])
        raise SystemExit(f"share: with share_devices: true, exit {allowed.returncode}")
    import optuna

    from effsearch.search.store.attrs import NOT_RUN, STATUS_KEY
    from effsearch.search.store.storage import open_url

    trials = optuna.load_study(study_name="share", storage=open_url(str(folder / "share.journal"))).get_trials()
    # Without the trials ended unrun by design (two workers asking at once: a second baseline, one past n_trials).
    trials = [t for t in trials if t.user_attrs.get(STATUS_KEY) not in NOT_RUN]
    marks = [(t.user_attrs.get("placement") or {}).get("shared") for t in trials]
    times = [t.user_attrs.get("time_to_target") for t in trials]
    pids = {(t.user_attrs.get("worker") or {}).get("pid") for t in trials}
    status = effsearch("status", str(path), env=env).stdout
    facts = {
        "refused_exit": refused.returncode,
        "refused_message": said,
        "trials": len(trials),
        "shared": marks,
        "time_to_target": times,
        "workers": len(pids),
        "status_marks": "~ = timed on a shared GPU" in status,
    }
    print(
        f"share: refused without share_devices (exit {refused.returncode}); allowed with it: {len(trials)} trials "
        f"on {len(pids)} workers, marked shared {sum(bool(m) for m in marks)}/{len(trials)}, status marks them: "
        f"{facts['status_marks']}; times to target (the first two the same config) {times}",
        flush=True,
    )
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "share.json").write_text(json.dumps(facts, indent=2))
    return 0 if refused.returncode == 2 and all(marks) else 1


if __name__ == "__main__":
    sys.exit(main())
