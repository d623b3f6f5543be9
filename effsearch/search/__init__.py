"""The study: study files, storage, the Optuna loop, and reading results back.

``studyfile.load`` checks a study file; ``runner.run`` runs or resumes it;
``queries`` answers questions of its trials (the baseline, the front); ``report.status_table``
prints them.
"""
