"""Running a study: the phases from the pre-flight to the final table, the worker processes, one
trial, when to stop, what is printed, the warm starts queued after the baseline.

- ``runner``: a study (or its two phases), start to end;
- ``workers``: the processes that run trials on the study's storage;
- ``objective``: one trial sampled, trained under the pruner, recorded and scored;
- ``budget``: when a worker stops (trials, compute, repeated errors);
- ``progress``: the header and the line per finished trial;
- ``warmstart``: configurations queued after the baseline and trained as given.
"""

__all__ = ["budget", "objective", "progress", "runner", "warmstart", "workers"]
