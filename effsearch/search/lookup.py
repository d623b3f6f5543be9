"""Finding a stored study from the command line (a study file or a name + --storage).

Shared by `status`, `export`, `best` and `dashboard`, so that a study that is not
there is answered the same way everywhere: with the studies that are. Optuna is
imported inside the functions: the CLI imports this module for its exception.
"""

from __future__ import annotations


class StudyNotFound(Exception):
    """No storage, or no such study in it (exit code 1 in the CLI)."""


def check_name(storage, name: str, url: str) -> None:
    import optuna

    from effsearch.search.studyfile import redact

    names = optuna.get_all_study_names(storage)
    if name not in names:
        raise StudyNotFound(f"no study {name!r} in {redact(url)} (studies there: {', '.join(names) or 'none'})")


def open_study(study: str, storage_flag: str | None = None):
    """(the study, its storage URL) from a study file or a study name."""
    import optuna

    from effsearch.search.storage import open_existing
    from effsearch.search.studyfile import locate

    name, url = locate(study, storage_flag)
    storage = open_existing(url, "--storage" if storage_flag else "storage")
    check_name(storage, name, url)
    return optuna.load_study(study_name=name, storage=storage), url
