"""Storage URLs and paths, as text: which storage a study file or flag names, how it is shown
(without its password), where its artifacts go. Nothing here opens a storage (``storage.py`` does)."""

from __future__ import annotations

import re
from pathlib import Path

from effsearch.config import ConfigError


def rdb_url(url: str) -> str:
    """SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3; use psycopg2 where only it is installed."""
    if url.startswith("postgresql://"):
        import importlib.util

        if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is not None:
            return "postgresql+psycopg2://" + url[len("postgresql://") :]
    return url


# Python packages that provide each database's default SQLAlchemy driver, for the message.
DRIVERS = {
    "postgresql": "psycopg2-binary (`uv run --extra postgres ...`)",
    "mysql": "mysqlclient or PyMySQL (mysql+pymysql://...)",
    "sqlite": "Python's sqlite3",
}


def check_url(url: str, where: str) -> None:
    """Refuse a storage URL SQLAlchemy cannot parse or whose driver is not installed (before any trial)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(rdb_url(url))
        parsed.get_dialect().import_dbapi()
    except (ArgumentError, ValueError) as e:
        raise ConfigError(where, f"not a valid storage URL {redact(url)!r}: {e}") from None
    except (ImportError, NoSuchModuleError) as e:
        backend = url.split("://", 1)[0].split("+", 1)[0]
        raise ConfigError(
            where, f"no driver for {backend}:// ({e}); install {DRIVERS.get(backend, 'its driver')}"
        ) from None
    if parsed.get_backend_name() == "sqlite" and not parsed.database:
        raise ConfigError(
            where,
            "sqlite:// without a path is an in-memory database, lost when the run ends; "
            "give a file: sqlite:///path/to/study.db",
        )


RDB_SCHEMES = ("sqlite", "postgresql", "mysql")
URL_LIKE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")  # `scheme:` (a path starts with /, ., ~ or a name without :)


def as_url(text: str, where: str) -> str | None:
    """``text`` checked as a storage URL; None when it is a file path."""
    scheme = URL_LIKE.match(text)
    if not scheme:
        return None
    # A URL, even a malformed one: never taken as a file name (sqlite:/x would make a folder `sqlite:`)
    name = scheme.group(1).split("+", 1)[0].lower()
    if name not in RDB_SCHEMES:
        raise ConfigError(
            where,
            f"unknown storage scheme {name!r}; allowed: {', '.join(RDB_SCHEMES)} URLs "
            "(e.g. postgresql://user:pass@host/db) or a journal file path",
        )
    if not text.startswith(scheme.group(0) + "//"):
        raise ConfigError(
            where,
            f"malformed storage URL {redact(text)!r}: a URL is {name}://..., e.g. "
            + ("sqlite:///path/to/study.db" if name == "sqlite" else f"{name}://user:pass@host/db")
            + "; a journal file path must not start with `NAME:`",
        )
    check_url(text, where)
    return text


def is_rdb_url(storage: str) -> bool:
    return "://" in storage


def redact(url: str) -> str:
    """A storage URL without its password, for printing."""
    if "://" not in url or "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    cred, host = rest.rsplit("@", 1)
    user = cred.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in cred else url


def sqlite_path(url: str) -> Path | None:
    """The database file of a sqlite:/// URL (None for other URLs)."""
    if not url.startswith("sqlite:///"):
        return None
    return Path(url[len("sqlite:///") :])


def file_storage(path: Path) -> str:
    """A storage given as a file: a database file as an sqlite URL, any other a journal file."""
    return f"sqlite:///{path}" if path.suffix in (".db", ".sqlite", ".sqlite3") else str(path)


def storage_url(arg: str) -> str:
    """A storage argument as --storage takes it: a URL, or a file (see ``file_storage``)."""
    return arg if "://" in arg else file_storage(Path(arg).expanduser().resolve())


def artifact_dir(study_path: Path | None, artifacts: str | None, storage: str) -> Path | None:
    """The artifact folder: the study file's ``artifacts`` (relative to it), else STEM.artifacts
    beside a journal file, else STEM.artifacts beside the study file (an RDB storage). None for
    an RDB storage with no study file (a storage served by itself)."""
    if artifacts:
        assert study_path is not None, "artifacts is a study file's key"
        return study_path.resolve().parent / artifacts
    if "://" not in storage:  # beside the journal file (which is beside the study by default)
        return Path(storage).with_suffix(".artifacts")
    return study_path.resolve().parent / f"{study_path.stem}.artifacts" if study_path is not None else None
