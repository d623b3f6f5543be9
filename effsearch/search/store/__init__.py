"""Where a study's trials live and what each leaves there.

- ``storage``: storage URLs, the one opener, artifact folders, every write past Optuna's public API;
- ``heartbeat``: a live worker told from a lost one on a journal file, and its trials re-queued;
- ``record``: what a trial writes (attributes, artifacts, a note) and reads back as fields;
- ``queries``: questions asked of the stored trials (counts, the baseline, the front, the best recipe).
"""

__all__ = ["heartbeat", "queries", "record", "storage"]
