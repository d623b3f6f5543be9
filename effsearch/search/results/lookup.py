"""Finding a stored study from the command line (a study file, a name + --storage, or a storage alone).

Shared by `status`, `export`, `best` and `dashboard`, so that a study that is not
there is answered the same way everywhere: exit code 2 (bad input), with the studies
that are. These commands only read: a storage is opened only once it is known to be
one (opening a journal file creates it; opening a database creates Optuna's tables).
Optuna is imported inside the functions: the CLI imports this module.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from effsearch.config import ConfigError
from effsearch.config.fields import quote

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage

STUDY_SUFFIXES = (".yaml", ".yml")
# What `urls.file_storage` opens as a database; any other file given as a storage is a journal.
STORAGE_SUFFIXES = (".journal", ".db", ".sqlite", ".sqlite3")
# Tables every Optuna RDB storage has (its schema's first and its version stamp).
OPTUNA_TABLES = ("studies", "version_info")


class StudyNotFound(ConfigError):
    """No storage there, or no such study in it: bad input (exit code 2), naming the storage."""


class UnknownStudy(StudyNotFound):
    """A storage that holds other studies but not this name; the message lists the studies there."""


def open_existing(url: str, where: str = "--storage") -> BaseStorage:
    """A reading storage (storage.open_url) that must already exist and be a study storage: a
    missing one is StudyNotFound, one that is not a study storage or cannot be opened a
    ConfigError naming ``where``. Nothing is created or written."""

    from effsearch.search.store.storage import open_url, unreadable
    from effsearch.search.store.urls import redact, sqlite_path

    db = sqlite_path(url)
    if ("://" not in url and not Path(url).is_file()) or (db is not None and not db.is_file()):
        raise StudyNotFound(where, f"no study storage at {redact(url)} (no studies there); `effsearch run` makes it")
    if db is not None:
        check_sqlite(db, where)
    elif "://" in url:
        check_database(url, where)
    try:
        return open_url(url)
    except Exception as e:  # a server that is down, a bad database file, a journal line that is no record
        raise ConfigError(where, f"cannot open {redact(url)}: {unreadable(url, e)}") from None


def check_sqlite(db: Path, where: str) -> None:
    """Refuse an SQLite file without Optuna's tables, reading it read-only (Optuna would add its
    tables to whatever database it is given)."""
    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.Error as e:  # not a database at all ("file is not a database"), or locked
        raise ConfigError(where, f"cannot read {db} as an SQLite database: {e}") from None
    _check_tables(tables, str(db), where)


def check_database(url: str, where: str) -> None:
    """Refuse a database server's database without Optuna's tables, before Optuna creates them."""
    import sqlalchemy

    from effsearch.search.store.storage import why
    from effsearch.search.store.urls import rdb_url, redact

    try:
        # A host that drops packets: fail in seconds, not minutes (as storage's own connection).
        connect = {"connect_timeout": 15} if url.startswith("postgresql") else {}
        engine = sqlalchemy.create_engine(rdb_url(url), connect_args=connect)
        try:
            tables = set(sqlalchemy.inspect(engine).get_table_names())
        finally:
            engine.dispose()
    except Exception as e:  # a server that is down, a missing driver, a bad URL
        raise ConfigError(where, f"cannot open {redact(url)}: {why(e)}") from None
    _check_tables(tables, redact(url), where)


def _check_tables(tables: set[str], shown: str, where: str) -> None:
    missing = [t for t in OPTUNA_TABLES if t not in tables]
    if missing:
        raise ConfigError(
            where,
            f"{shown} is a database but no study storage (it has no Optuna tables: "
            f"{', '.join(missing)} missing); give the storage `effsearch run` wrote",
        )


def check_name(storage: BaseStorage, name: str, url: str) -> None:
    import optuna

    from effsearch.search.store.urls import redact

    names = optuna.get_all_study_names(storage)
    if name not in names:
        raise UnknownStudy(
            "study", f"no study {quote(name)} in {redact(url)} (studies there: {', '.join(names) or 'none'})"
        )


def is_storage(arg: str) -> bool:
    """A storage URL or a journal/database file (not a study file, not a study name); a file with a
    storage's suffix counts though it is not there, so that it is answered as a missing storage."""
    if "://" in arg:
        return True
    p = Path(arg)
    return p.suffix.lower() in STORAGE_SUFFIXES or (p.is_file() and p.suffix.lower() not in STUDY_SUFFIXES)


def open_study(study: str, storage_flag: str | None = None) -> tuple[optuna.Study, str]:
    """(the study, its storage URL) from a study file, a study name, or a storage alone (the
    study it holds)."""
    import optuna

    from effsearch.search.study.studyfile import locate

    if is_storage(study):
        if storage_flag is not None:
            raise ConfigError(
                "--storage",
                f"{quote(study)} is already a storage; give a study name with --storage, or the storage alone",
            )
        return the_study_in(study)
    name, url = locate(study, storage_flag)
    storage = open_existing(url, "--storage" if storage_flag else "storage")
    check_name(storage, name, url)
    return optuna.load_study(study_name=name, storage=storage), url


def the_study_in(arg: str) -> tuple[optuna.Study, str]:
    """The one study a storage holds: with a tuning phase, its confirmed phase (as its study file
    names it); with several, a StudyNotFound listing them."""
    import optuna

    from effsearch.search.store.attrs import PHASE_KEY
    from effsearch.search.store.urls import redact, storage_url

    url = storage_url(arg)
    storage = open_existing(url, "study")
    studies = storage.get_all_studies()
    shown = [s for s in studies if s.user_attrs.get(PHASE_KEY) != "tune"]
    if len(shown) != 1:
        names = ", ".join(s.study_name for s in studies)
        raise UnknownStudy(
            "study", f"{redact(url)} holds {len(shown)} studies ({names}); give one's name, with --storage={arg}"
        )
    return optuna.load_study(study_name=shown[0].study_name, storage=storage), url
