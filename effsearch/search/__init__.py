"""The study: study files, storage, the Optuna loop, and reading results back.

``studyfile.load`` checks a study file; ``runner.run`` runs or resumes it;
``report.status_table`` prints trials and the Pareto front.
"""
