"""The anytime yardstick: what a study variant finds within a point of the baseline's accuracy,
against the compute it spent, in runs of the baseline.

    python -m research.anytime replay [--seeds 20] [--only NAME,...]          # the replay table, no training
    python -m research.anytime live --study studies/quickstart.yaml [--seeds 2] [--data-dir DIR]

For each variant (a sampler, a target, warm starts; the same space and pruner for all) and seed,
the curve is the best speed-up so far, over the baseline and over the best recipe, of a finished
trial within a point of the baseline's final validation accuracy, timed to that accuracy (the
baseline's final less a point: what the user keeps); the report is the mean curve over seeds and
its value at 5, 10 and 20 baseline runs.

Modules: ``curve`` (the curve of one search and the mean over seeds), ``variants`` (what is
compared), ``replay`` (a variant searched on the replay's surrogate, ``research/replay``),
``live`` (a variant as a real study), ``cli`` (the command line).
"""
