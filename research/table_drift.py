"""Does the replay's table still describe today's trainer? Train some of its rows again.

research/data/quickstart_curves.jsonl was recorded with the trainer of its day. This trains
``--rows`` of its configurations again (chosen by ``--seed``), each right after a baseline run,
as the recorder did, and compares costs on the baseline's scale (the replay's scale) and final
accuracies with the table's. Run two at once (seeds 1 and 2) to load the cores as the
recording's two recorders did.

    uv run python -m research.table_drift --rows 12 --seed 1 & uv run python -m research.table_drift --rows 12 --seed 2
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

import torch

from research.record_quickstart import run

HERE = Path(__file__).parent


def parts(run: dict) -> dict:
    return {"train": run["train_seconds"], "eval": run["eval_seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--table", type=Path, default=HERE / "data" / "quickstart_curves.jsonl")
    args = ap.parse_args()
    if args.rows < 1:
        ap.error(f"--rows must be at least 1; got {args.rows}")
    torch.set_num_threads(1)  # as each recorder ran
    from effsearch.config import TrainConfig

    rows = [json.loads(line) for line in args.table.read_text().splitlines() if line.strip()]
    base = next(r for r in rows if r["kind"] == "baseline")
    pool = [r for r in rows if r["kind"] == "random" and r.get("full", {}).get("history")]
    old_base = statistics.median(r["full"]["train_seconds"] for r in rows if r["kind"] == "baseline")
    out = []
    for r in random.Random(args.seed).sample(pool, min(args.rows, len(pool))):
        new_base = run(TrainConfig.from_dict(base["config"]))["train_seconds"]
        new = run(TrainConfig.from_dict(r["config"]))
        if not new.get("history"):
            print(f"row {r['index']}: {new['status']} ({new.get('reason')})")
            continue
        o, n = parts(r["full"]), parts(new)
        out.append(
            (
                o["train"] / old_base,
                n["train"] / new_base,
                o["eval"] / old_base,
                n["eval"] / new_base,
                r["full"]["val_accuracy"],
                new["val_accuracy"],
            )
        )
        print(
            f"row {r['index']:4d}: train / baseline train {out[-1][0]:.3f} -> {out[-1][1]:.3f}; evaluation "
            f"{out[-1][2]:.3f} -> {out[-1][3]:.3f}; final val accuracy {out[-1][4]:.4f} -> {out[-1][5]:.4f}",
            flush=True,
        )
    if out:
        med = [statistics.median(x[i] for x in out) for i in range(4)]
        same = sum(1 for x in out if abs(x[4] - x[5]) < 1e-9)
        print(
            f"median of {len(out)}: train / baseline train {med[0]:.3f} (table) -> {med[1]:.3f} (today); "
            f"evaluation / baseline train {med[2]:.3f} -> {med[3]:.3f}; final accuracy the same in {same}, "
            f"largest difference {max(abs(x[4] - x[5]) for x in out):.4f}"
        )


if __name__ == "__main__":
    main()
