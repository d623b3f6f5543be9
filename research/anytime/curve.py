"""One search's anytime curve and the mean over seeds.

A search is a list of finished trials in the order they finished (``Event``): the compute spent
when each finished (in baseline runs), its speed-up over the baseline to the accuracy the user
keeps (None: it did not end within a point of the baseline, or never reached that accuracy), and
where it came from (``baseline``, a warm start's label, or ``search``: the sampler proposed it).
The curve at compute c is the best speed-up among the trials finished by c; before the baseline
has finished there is none (read as 1.0 in the mean: the user still has the baseline). Over the
best recipe: the curve divided by the best recipe's speed-up on that seed (at least 1.0: the
baseline is known too), whether or not the variant trained the recipes.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MARKS = (5.0, 10.0, 20.0)  # baseline runs at which the report reads the curve


@dataclass(frozen=True)
class Event:
    runs: float  # compute spent when it finished, in baseline runs
    speedup: float | None  # over the baseline, to the baseline's final accuracy less a point
    origin: str  # "baseline", a warm start's label, or "search"


@dataclass
class Search:
    """One variant's search on one seed."""

    events: list[Event]
    recipe: float  # the best recipe's speed-up within the point on this seed (1.0: none beats the baseline)

    def best_at(self, runs: float) -> tuple[float, str | None]:
        """(the best speed-up among trials finished by ``runs``, its origin); (1.0, None) before any."""
        best, origin = 1.0, None
        for e in self.events:
            if e.runs > runs + 1e-9:
                break
            if e.speedup is not None and (origin is None or e.speedup > best):
                best, origin = e.speedup, e.origin
        return best, origin

    @property
    def spent(self) -> float:
        return self.events[-1].runs if self.events else 0.0


@dataclass(frozen=True)
class Summary:
    """The mean curve of one variant over its seeds, read at ``MARKS``."""

    name: str
    seeds: int
    base: dict  # mark -> mean best speed-up over the baseline
    recipe: dict  # mark -> mean best speed-up over the best recipe
    proposed: dict  # mark -> share of seeds whose best is a trial the sampler proposed
    grid: list  # (runs, mean over the baseline, mean over the recipe) every baseline run
    spent: float  # mean compute spent, baseline runs


def summarise(name: str, searches: Sequence[Search], marks: Sequence[float] = MARKS, step: float = 1.0) -> Summary:
    top = max(max(marks), max((s.spent for s in searches), default=0.0))
    points = [step * i for i in range(int(top / step) + 1)]

    def mean_at(x: float) -> tuple[float, float, float]:
        best = [s.best_at(x) for s in searches]
        base = statistics.fmean(b for b, _ in best)
        over = statistics.fmean(b / max(s.recipe, 1.0) for (b, _), s in zip(best, searches))
        proposed = statistics.fmean(1.0 if o == "search" else 0.0 for _, o in best)
        return base, over, proposed

    at = {m: mean_at(m) for m in marks}
    return Summary(
        name,
        len(searches),
        {m: v[0] for m, v in at.items()},
        {m: v[1] for m, v in at.items()},
        {m: v[2] for m, v in at.items()},
        [(x, *mean_at(x)[:2]) for x in points],
        statistics.fmean(s.spent for s in searches) if searches else 0.0,
    )


def table(rows: Sequence[Summary], marks: Sequence[float] = MARKS) -> str:
    """The report: per variant, the mean best speed-up within a point at each mark."""
    head = (
        "| variant | seeds | "
        + " | ".join(f"x baseline @{m:g}" for m in marks)
        + " | "
        + " | ".join(f"x best recipe @{m:g}" for m in marks)
        + f" | proposed @{marks[-1]:g} |"
    )
    lines = [head, "|" + " --- |" * (3 + 2 * len(marks))]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.seeds} | "
            + " | ".join(f"{r.base[m]:.2f}" for m in marks)
            + " | "
            + " | ".join(f"{r.recipe[m]:.2f}" for m in marks)
            + f" | {r.proposed[marks[-1]]:.0%} |"
        )
    return "\n".join(lines)
