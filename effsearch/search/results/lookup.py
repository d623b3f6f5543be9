"""Finding a stored study from the command line (a study file or a name + --storage).

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

    from effsearch.search.store.storage import open_url, why
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
    except Exception as e:  # a server that is down, a bad database file
        raise ConfigError(where, f"cannot open {redact(url)}: {why(e)}") from None


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


def open_study(study: str, storage_flag: str | None = None) -> tuple[optuna.Study, str]:
    """(the study, its storage URL) from a study file or a study name."""
    import optuna

    from effsearch.search.study.studyfile import locate

    name, url = locate(study, storage_flag)
    storage = open_existing(url, "--storage" if storage_flag else "storage")
    check_name(storage, name, url)
    return optuna.load_study(study_name=name, storage=storage), url
