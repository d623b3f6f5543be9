"""Finding a stored study from the command line (a study file or a name + --storage).

Shared by `status`, `export`, `best` and `dashboard`, so that a study that is not
there is answered the same way everywhere: with the studies that are. Optuna is
imported inside the functions: the CLI imports this module for its exception.
"""

from __future__ import annotations

from pathlib import Path

from effsearch.config import ConfigError
from effsearch.config.fields import quote


class StudyNotFound(Exception):
    """No storage, or no such study in it (no storage yet: exit code 1 in the CLI, run it first)."""


class UnknownStudy(StudyNotFound, ConfigError):
    """A storage that holds other studies but not this name: bad input, a ConfigError (exit code 2)
    whose message lists the studies that are there."""


def open_existing(url: str, where: str = "--storage"):
    """A reading storage (storage.open_url) that must already exist (opening a journal file would
    create it): a missing one is StudyNotFound; one that cannot be opened is a ConfigError naming
    ``where`` (exit code 2)."""
    import optuna

    from effsearch.search.storage import open_url, redact, sqlite_path, why

    db = sqlite_path(url)
    if ("://" not in url and not Path(url).is_file()) or (db is not None and not db.is_file()):
        raise StudyNotFound(f"no study storage at {url} yet (run `effsearch run` first)")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        return open_url(url)
    except Exception as e:  # a server that is down, a bad database file
        raise ConfigError(where, f"cannot open {redact(url)}: {why(e)}") from None


def check_name(storage, name: str, url: str) -> None:
    import optuna

    from effsearch.search.storage import redact

    names = optuna.get_all_study_names(storage)
    if name not in names:
        raise UnknownStudy("study", f"no study {quote(name)} in {redact(url)} "
                                    f"(studies there: {', '.join(names) or 'none'})")


def open_study(study: str, storage_flag: str | None = None):
    """(the study, its storage URL) from a study file or a study name."""
    import optuna

    from effsearch.search.studyfile import locate

    name, url = locate(study, storage_flag)
    storage = open_existing(url, "--storage" if storage_flag else "storage")
    check_name(storage, name, url)
    return optuna.load_study(study_name=name, storage=storage), url
