"""The study: what to search and how (``study``), where its trials live (``store``), how weak trials
are stopped (``pruners``), the loop that runs them (``run``) and what is shown of them (``results``).

Floors inside, lowest first: ``pareto`` (plain non-dominated sorting) and ``store``; ``pruners``;
``study``; ``run``; ``results`` (nothing below imports it). docs/architecture.md draws them.
"""

__all__ = ["pareto", "pruners", "results", "run", "store", "study"]
