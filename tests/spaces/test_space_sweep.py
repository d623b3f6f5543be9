"""Configurations sampled from the GPU study's space train on the CPU without crashing
(benchmarks/space_sweep.py: compile through Dynamo's eager backend, fp32, a sliver of the data).
Two crashes a GPU study met or would have met were of this kind: compile + SWA, and K-FAC's
eigh on a rank-deficient factor; a lent GPU found the first, this sweep the second."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sampled_gpu_space_configs_train_without_crashing(fashion_dir, capsys):
    spec = importlib.util.spec_from_file_location("space_sweep", ROOT / "benchmarks" / "space_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # 0.09 of tests/data's 3,600 training images: the 324 the sweep's default takes of the full set.
    crashes = mod.sweep(
        ROOT / "studies" / "fashion-mnist-gpu.yaml", n=12, seed=0, data_fraction=0.09, data_root=str(fashion_dir)
    )
    out = capsys.readouterr().out
    assert not crashes, "\n".join(crashes)
    assert out.count(": completed") + out.count(": diverged") + out.count(": skipped") == 12, out
    assert "compile True" in out  # the sample met compile (through the eager backend)
