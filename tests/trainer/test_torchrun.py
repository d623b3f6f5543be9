"""``effsearch train`` under ``torchrun``: two CPU processes (gloo) join the launcher's group
(trainer/parallel/distributed.py, ``under_torchrun``) instead of starting ranks of their own.

What the product says: every rank trains its shard of each epoch with gradients averaged
across ranks (here through the TopK compression hook), rank 0 speaks and writes the one
result.json, and a rank's exit code says whether its run completed. A plugin (``--plugin``,
imported by every rank) counts each rank's optimizer steps and sums its parameters after each
one, so the test sees both ranks train the same model."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.support.helpers import tiny

ROOT = Path(__file__).resolve().parents[2]

# Imported by each rank before it trains: after every optimizer step, the step count and the sum
# of the parameters, written to RANKPROBE_DIR/rank<RANK>.json when the process exits.
PROBE = textwrap.dedent("""
    import atexit, json, os
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    seen = {"rank": int(os.environ["RANK"]), "world": int(os.environ["WORLD_SIZE"]), "steps": 0, "sums": []}

    def after_step(optimizer, args, kwargs):
        seen["steps"] += 1
        with torch.no_grad():
            seen["sums"].append(sum(float(p.double().sum()) for g in optimizer.param_groups for p in g["params"]))

    register_optimizer_step_post_hook(after_step)

    @atexit.register
    def write():
        with open(os.path.join(os.environ["RANKPROBE_DIR"], f"rank{seen['rank']}.json"), "w") as f:
            json.dump(seen, f)
""")


@pytest.mark.timeout(300)
def test_two_cpu_processes_under_torchrun_train_together_and_rank_0_writes_one_result(tmp_path):
    cfg = tiny(
        **{
            "dataset.synthetic_size": 320,
            "epochs": 1,
            "distributed.processes": 2,
            "distributed.compression.method": "topk",
            "distributed.compression.ratio": 0.01,
        }
    )
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "rankprobe.py").write_text(PROBE)
    probes = tmp_path / "probes"
    probes.mkdir()
    out = tmp_path / "run"
    env = {
        **os.environ,
        "RANKPROBE_DIR": str(probes),
        "TQDM_DISABLE": "1",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes",
            "1",
            "--nproc-per-node",
            "2",
            "-m",
            "effsearch.cli",
            "train",
            str(tmp_path / "c.yaml"),
            "--out",
            str(out),
            "--plugin",
            "rankprobe",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc.stdout, proc.stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:  # a hang: torchrun stops its ranks on SIGTERM (SIGKILL would orphan them)
        proc.terminate()
        proc.communicate(timeout=60)
        raise
    assert proc.returncode == 0, proc.stderr[-3000:]  # torchrun: every rank exited 0 (its run completed)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]

    # Both ranks trained, step for step, the same model: the gradients were averaged across them.
    ranks = [json.loads((probes / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["world"] == 2 for r in ranks)
    assert ranks[0]["steps"] == ranks[1]["steps"] >= 2
    assert ranks[0]["sums"] == pytest.approx(ranks[1]["sums"], rel=1e-9, abs=1e-9)
    assert ranks[0]["sums"][0] != pytest.approx(ranks[0]["sums"][-1], rel=1e-9)  # the parameters moved

    # Rank 0 speaks, once; the other rank is silent.
    assert proc.stderr.count("effsearch train:") == 1 and proc.stderr.count("status: completed") == 1
    printed = json.loads(proc.stdout.strip().splitlines()[-1])
    # One result.json, rank 0's: the run as two processes, their shards making one effective batch.
    assert sorted(p.name for p in out.iterdir()) == ["result.json"]
    result = json.loads((out / "result.json").read_text())
    assert result == printed and result["status"] == "completed"
    f = result["final"]
    assert f["processes"] == 2 and f["effective_batch"] == 2 * cfg["batch_size"]
    # Each rank trains its half of the epoch: the steps of one rank, the images of both.
    assert f["steps"] == ranks[0]["steps"]
    assert result["history"][-1]["samples_seen"] == f["steps"] * f["effective_batch"]
    # TopK at 1%: each rank sends a small fraction of the dense gradient a step.
    assert 0 < f["comm_bytes_per_step"] < 0.1 * f["comm_bytes_per_step_uncompressed"]
