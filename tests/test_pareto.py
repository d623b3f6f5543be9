"""Non-dominated sorting: the two-objective path agrees with the pairwise definition."""

import random

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
