"""Where a study's trials live and what each leaves there.

- ``attrs``: the trial record's vocabulary, every attribute key a study writes (its stored format);
- ``urls``: storage URLs and artifact folders as text;
- ``storage``: the one opener, artifact stores, every write past Optuna's public API;
- ``heartbeat``: a live worker told from a lost one on a journal file, and its trials re-queued;
- ``record``: what a trial writes (attributes, artifacts, a note) and reads back as fields;
- ``queries``: questions asked of the stored trials (counts, the baseline, the front, the best recipe).
"""

__all__ = ["attrs", "heartbeat", "queries", "record", "storage", "urls"]
