"""The search-efficiency replay: which search strategy (sampler, rung rule, tuning phase) finds a
good Pareto front with the least compute, replayed from recorded learning curves instead of
trained, so that 40 seeds of some 30 methods fit a quarter of an hour on 2 cores.

    python -m research.replay            # the default run: 40 seeds, ends in compute_ratio=

Modules, bottom up: ``run`` (one replayed run, its costs), ``table`` (the recorded table),
``surrogate`` (the answers to a proposal, and their checks), ``rules`` and ``candidates`` (rung
rules), ``world`` (one search), ``methods`` (what is compared), ``report`` (what is printed),
``cli`` (the command line).
"""
