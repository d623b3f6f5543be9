"""The search-efficiency replay's yardstick rule (benchmarks/search_efficiency.py)."""

import importlib.util
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "search_efficiency.py"


@pytest.fixture(scope="module")
def se():
    spec = importlib.util.spec_from_file_location("search_efficiency", PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up while they are built
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


def run(se, reach_at: int | None, final: float):
    """A run on the 1/9 grid: 1 s a ninth, 0.5 accuracy until ``reach_at`` (0.96 from there)."""
    acc = [0.96 if reach_at is not None and k >= reach_at else 0.5 for k in range(se.N_GRID)]
    return se.Run([float(k + 1) for k in range(se.N_GRID)], acc, final, 0.0, 0.1, 0.2)


def test_the_oracle_keeps_exactly_the_trials_that_raise_the_front(se):
    rule = se.OracleRule()
    rule.ref = (20.0, -0.9)
    pools: dict = {}
    target = 0.95
    assert rule.play(run(se, 4, 0.97), target, pools, 0, may_prune=False) is None  # the baseline: 5 s, 0.97
    # Slower and no more accurate than the baseline: stopped at the first rung (grid point 0, 1/9).
    assert rule.play(run(se, 6, 0.96), target, pools, 1) == 0
    assert rule.play(run(se, None, 0.80), target, pools, 2) == 0  # a miss
    # Faster, or more accurate: runs to the end and joins the front the next trial is judged on.
    assert rule.play(run(se, 2, 0.955), target, pools, 3) is None
    assert rule.play(run(se, 8, 0.99), target, pools, 4) is None
    assert rule.play(run(se, 3, 0.95), target, pools, 5) == 0  # dominated by the 3 s / 0.955 trial now
    assert len(pools["oracle"]) == 3
