"""What is shown of a study: the status table, the front exported, the pick written as a
TrainConfig, plots, the dashboard, the cost in baseline runs and the anytime curve. Nothing
below this package imports it.

- ``lookup``: a stored study found from the command line (a study file, or a name + storage);
- ``report``: trials as text (the status table, the best-recipe line);
- ``export``, ``plots``: the front as CSV, JSON, YAML, HTML or PNG;
- ``best``: one trial's TrainConfig by a pick rule;
- ``dashboard``: optuna-dashboard on the study's storage and artifacts;
- ``cost``: what a study cost in runs of its baseline, and when its pick pays that back;
- ``anytime``: the best speed-up within a point against compute spent.
"""

__all__ = ["anytime", "best", "cost", "dashboard", "export", "lookup", "plots", "report"]
