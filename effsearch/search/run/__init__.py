"""Running a study: the phases from the pre-flight to the final table, the worker processes, one
trial, when to stop, what is printed, the warm starts queued after the baseline.

- ``runner``: a study (or its two phases), start to end;
- ``workers``: the processes that run trials on the study's storage;
- ``objective``: one trial sampled, trained under the pruner, recorded and scored;
- ``budget``: when a worker stops (trials, compute, repeated errors);
- ``progress``: what a run shows (``Report``: the header, a line per finished trial, the table, the summary);
- ``errors``: ``StudyFailed``, what a run raises when it cannot do its work;
- ``warmstart``: configurations queued after the baseline and trained as given.
"""

__all__ = ["budget", "errors", "objective", "progress", "runner", "warmstart", "workers"]
