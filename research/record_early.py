"""Record the first ninth of every run in the replay's table, evaluated at 1/27, 2/27 and 3/27.

research/data/quickstart_curves.jsonl evaluates each configuration at every 1/9 of its
budget, so the replay (research/replay) cannot place a rung before 1/9. This
trains each configuration of that table (and of quickstart_curves_loaded.jsonl, and the
baseline seeds) again, at full fidelity and with its seed, evaluates it at 1/27, 2/27 and 3/27
of its budget (``train(eval_at=...)``, as a study's pruner asks for its rungs) and stops it
after the third. One JSON line per run: kind, index, the points (epoch, train seconds, val
accuracy, val loss and train loss; the first recording has no losses) and the wall time. The replay uses
the accuracies as they are and the train seconds as shares of the 3/27 point's (this
recording's load is not the table's). research/data/quickstart_early_loss.jsonl is the
recording with losses (``--out`` there, ``--workers 2``, 4 minutes on 2 idle cores; 675 of
its 708 runs' accuracies equal the first recording's to the digit); the replay reads only
its losses.
Resumable: runs already in the output are skipped.

    EFFSEARCH_DATA_DIR=/work/shared/data nohup nice uv run python -m research.record_early > /tmp/early.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

HERE = Path(__file__).parent
SOURCES = [HERE / "data" / "quickstart_curves.jsonl", HERE / "data" / "quickstart_curves_loaded.jsonl"]
OUT = HERE / "data" / "quickstart_early.jsonl"
POINTS = (1 / 27, 2 / 27, 3 / 27)


def early(config: dict) -> dict:
    from effsearch.config import TrainConfig
    from effsearch.trainer.training import train

    cfg = TrainConfig.from_dict(config, source="table")
    cfg = cfg.replace(eval_every=cfg.epochs)  # only the points asked for (and the end, never reached)
    at = tuple(p * cfg.epochs for p in POINTS)
    t = time.perf_counter()
    try:
        r = train(cfg, progress=False, eval_at=at, on_eval=lambda p: "recorded" if p.epoch >= at[-1] - 1e-4 else None)
    except Exception as e:  # a failing config is data too
        return {"status": "failed", "reason": f"{type(e).__name__}: {e}", "points": []}
    # Losses too (fields 4-5): a rung could rank on them where accuracy is still near chance.
    return {
        "status": r.status,
        "points": [
            [round(p.epoch, 5), round(p.train_seconds, 4), p.val_accuracy, p.val_loss, p.train_loss] for p in r.history
        ],
        "wall_seconds": round(time.perf_counter() - t, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--worker", type=int, default=0, help="this recorder's share: runs i with i %% workers == worker")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    if args.workers < 1 or not 0 <= args.worker < args.workers:
        ap.error(f"--worker must be in 0..--workers - 1 and --workers >= 1 (got {args.worker} of {args.workers})")
    torch.set_num_threads(1)
    done = set()
    if args.out.exists():
        done = {(r["kind"], r["index"]) for r in map(json.loads, args.out.read_text().splitlines()) if r}
    rows, seen = [], set()
    for src in SOURCES:
        for line in src.read_text().splitlines():
            r = json.loads(line)
            key = (r["kind"], r["index"])
            if key in seen or (src != SOURCES[0] and r["kind"] == "baseline"):
                continue  # the replay takes a configuration from the first recording that has it
            seen.add(key)
            rows.append(r)
    todo = [r for i, r in enumerate(rows) if (r["kind"], r["index"]) not in done and i % args.workers == args.worker]
    print(f"{len(rows)} runs, {len(todo)} to record", flush=True)
    t0 = time.perf_counter()
    for i, r in enumerate(todo):
        rec = {"kind": r["kind"], "index": r["index"], **early(r["config"])}
        with args.out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        if i % 25 == 0:
            print(f"{i + 1}/{len(todo)} {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
