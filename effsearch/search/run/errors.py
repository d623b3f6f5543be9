"""What a run raises when it cannot do its work (``effsearch`` re-exports it; the CLI's exit code 1).

A leaf without imports: ``import effsearch`` takes it without loading Optuna."""


class StudyFailed(RuntimeError):
    """A study that could not do its work (the CLI's exit code 1): the message holds why."""
