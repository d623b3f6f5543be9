"""Non-dominated sorting: the two-objective path agrees with the pairwise definition."""

import math
import random

import pytest

from effsearch.search import pareto


def pairwise_fronts(points):
    left, out = set(range(len(points))), []
    while left:
        front = sorted(i for i in left if not any(pareto.dominates(points[j], points[i]) for j in left))
        out.append(front)
        left -= set(front)
    return out


def test_two_objective_fronts_match_the_definition_with_ties_and_duplicates():
    rng = random.Random(0)
    for n in (0, 1, 2, 7, 60):
        for _ in range(30):
            # Few distinct values: ties in either objective and identical points are common.
            pts = [(rng.randint(0, 6), rng.randint(0, 6)) for _ in range(n)]
            assert pareto.fronts(pts) == pairwise_fronts(pts)


def test_three_objectives_still_sorted():
    pts = [(1, 2, 3), (2, 1, 3), (3, 3, 3), (1, 1, 1)]
    assert pareto.fronts(pts) == pairwise_fronts(pts)


def test_fronts_in_three_objectives_match_the_definition():
    rng = random.Random(1)
    for n in (1, 2, 5, 30):
        for _ in range(20):
            pts = [tuple(rng.randint(0, 4) for _ in range(3)) for _ in range(n)]
            assert pareto.fronts(pts) == pairwise_fronts(pts)


def test_dominates_needs_no_worse_everywhere_and_better_somewhere():
    assert pareto.dominates((1, 2), (1, 3)) and pareto.dominates((0, 0, 0), (1, 1, 1))
    assert not pareto.dominates((1, 3), (1, 3))  # equal: neither
    assert not pareto.dominates((0, 4), (1, 3)) and not pareto.dominates((1, 3), (0, 4))


def reference_crowding(points, front):
    """Deb et al.'s crowding distance, written out: per objective, the ends are infinite and each
    inner member adds the normalised gap between its two neighbours."""
    if len(front) <= 2:
        return {i: math.inf for i in front}
    dist = {i: 0.0 for i in front}
    for m in range(len(points[front[0]])):
        order = sorted(front, key=lambda i: points[i][m])
        span = points[order[-1]][m] - points[order[0]][m]
        dist[order[0]] = dist[order[-1]] = math.inf
        for k in range(1, len(order) - 1):
            if span:
                dist[order[k]] += (points[order[k + 1]][m] - points[order[k - 1]][m]) / span
    return dist


def test_crowding_matches_the_definition():
    rng = random.Random(2)
    for dims in (2, 3):
        for n in (1, 2, 3, 4, 9):
            for _ in range(20):
                pts = [tuple(rng.uniform(1, 10) for _ in range(dims)) for _ in range(n)]
                front = list(range(n))
                assert pareto.crowding(pts, front) == pytest.approx(reference_crowding(pts, front))
    # By hand: the middle point's neighbours span the whole range in each objective: 4/4 + 4/4.
    assert pareto.crowding([(1, 5), (3, 3), (5, 1)], [0, 1, 2]) == {0: math.inf, 1: 2.0, 2: math.inf}
    assert pareto.crowding([(1, 5), (2, 3), (5, 1)], [0, 1, 2])[1] == pytest.approx(1.0 + 1.0)
    assert pareto.crowding([(1, 9), (2, 3), (3, 2), (5, 1)], [0, 1, 2, 3])[2] == pytest.approx(3 / 4 + 2 / 8)
    # An objective with one value everywhere adds nothing, and the others still count.
    pts = [(1, 1, 3), (1, 2, 2), (1, 3, 1), (1, 2.5, 1.5)]
    assert pareto.crowding(pts, [0, 1, 2, 3]) == pytest.approx(reference_crowding(pts, [0, 1, 2, 3]))
    assert pareto.crowding(pts, [0, 1, 2, 3])[1] == pytest.approx(1.5 / 2 + 1.5 / 2)
    # Only the members of ``front`` count, with their own ends.
    assert pareto.crowding([(0, 9), (2, 4), (4, 2), (9, 0)], [1, 2]) == {1: math.inf, 2: math.inf}
    assert pareto.crowding([(9, 9), (1, 5), (3, 3), (5, 1)], [1, 2, 3])[2] == pytest.approx(2.0)


def test_rank_orders_by_front_then_by_crowding_then_by_index():
    rng = random.Random(3)
    for _ in range(30):
        pts = [(rng.randint(0, 5), rng.randint(0, 5)) for _ in range(rng.randint(1, 12))]
        want = []
        for front in pairwise_fronts(pts):
            d = reference_crowding(pts, front)
            want += sorted(front, key=lambda i: (-d[i], i))
        assert pareto.rank(pts) == want
    assert pareto.rank([]) == []


def test_hypervolume_matches_a_count_of_unit_cells():
    """On integer points the dominated area is the number of unit cells [x, x+1) x [y, y+1)
    below the reference that some point dominates."""
    rng = random.Random(4)
    for _ in range(60):
        ref = (rng.randint(3, 8), rng.randint(3, 8))
        pts = [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(rng.randint(0, 6))]
        cells = sum(1 for x in range(ref[0]) for y in range(ref[1]) if any(px <= x and py <= y for px, py in pts))
        assert pareto.hypervolume_2d(pts, ref) == cells, (pts, ref)
    assert pareto.hypervolume_2d([(0.5, 1.0), (1.0, 0.25)], (2.0, 3.0)) == pytest.approx(1.5 * 2.0 + 1.0 * 0.75)
