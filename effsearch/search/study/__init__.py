"""What a study is: its file checked into a ``StudySpec``, its tuning phase, its named recipes and
its sampler.

- ``studyfile``: a study file (or mapping) checked, every error naming the file and field;
- ``phases``: the tuning phase (search on a data subset, confirm on all of it);
- ``recipes``: named starting recipes, each a change to the study's base;
- ``samplers``: Optuna samplers by the names study files use.
"""

__all__ = ["phases", "recipes", "samplers", "studyfile"]
