"""An Optuna storage opened read-only, as the source of an import, and Optuna's and the
database's errors as one-line ``AboError``\\ s.

Optuna's ``RDBStorage`` creates its tables in whatever it is given (an abo database, a path
that does not exist), so a source is checked before Optuna sees it: a SQLite source must be
an existing file holding Optuna's tables, opened through SQLite's read-only URI
(``file:...?mode=ro``); a PostgreSQL source must hold Optuna's tables and is read in
read-only transactions. Optuna then skips its table creation, so nothing is ever written.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from abo.core.exceptions import AboError
from abo.interop._common import optuna_module

OPTUNA_TABLES = ("studies", "study_directions", "trials", "trial_params", "trial_values",
                 "version_info", "alembic_version")  # fmt: skip
"""Tables every Optuna storage has (those an import reads, and the two of its version)."""
ABO_TABLES = ("abo_studies", "abo_trials")
SQLITE_HEADER = b"SQLite format 3\x00"


def _one_line(exc: BaseException) -> str:
    """An exception's message in one line: a database error's driver message, never the SQL
    text SQLAlchemy appends."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    return first or type(exc).__name__


@contextlib.contextmanager
def translated(field: str, url: str) -> Iterator[None]:
    """Run a block that talks to the Optuna storage ``url``, raising its database's and
    Optuna's errors as one ``AboError`` line about ``field`` (abo's own errors pass as they
    are)."""
    try:
        yield
    except AboError:
        raise
    except Exception as exc:  # SQLAlchemy, the driver (or its absence), Optuna: the storage's
        raise AboError(
            f"{field}: {_safe(url)}: {type(exc).__name__}: {_one_line(exc)}", field=field
        ) from None


def _safe(url: str) -> str:
    """``url`` without its password."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL: shown as given
        return url


@dataclass(frozen=True)
class Source:
    """What an import reads of an Optuna study, read once: its trials (``FrozenTrial``),
    directions, metric names and user attributes."""

    name: str
    trials: list[Any]
    directions: list[Any]
    metric_names: list[str] | None
    user_attrs: dict[str, Any]


def read_study(study_name: str, url: str) -> Source:
    """Read the Optuna study ``study_name`` of the storage ``url`` without writing anything.

    Raises:
        AboError: ``url`` is not an Optuna storage (missing, a directory, not a database, an
            abo database, an empty one ...), or has no study of that name (the field says
            which).
    """
    optuna = optuna_module()
    if not isinstance(study_name, str) or not study_name:
        raise AboError(f"optuna_study: expected a study name, got {study_name!r}",
                       field="optuna_study")  # fmt: skip
    ro_url, engine_kwargs = read_only_url(url)
    with translated("optuna_storage", url):
        _check_tables(ro_url, engine_kwargs, url)
        storage = optuna.storages.RDBStorage(
            ro_url, engine_kwargs=engine_kwargs, skip_table_creation=True
        )
    try:
        with translated("optuna_storage", url):
            names = [s.study_name for s in storage.get_all_studies()]
        if study_name not in names:
            listed = ", ".join(repr(n) for n in names[:10]) + (" ..." if len(names) > 10 else "")
            raise AboError(
                f"optuna_study: no Optuna study {study_name!r} in {_safe(url)} "
                f"({'it has ' + listed if names else 'it has no study'})",
                field="optuna_study",
            )
        with translated("optuna_storage", url):
            study = optuna.load_study(study_name=study_name, storage=storage)
            return Source(
                study_name,
                list(study.get_trials(deepcopy=False)),
                list(study.directions),
                study.metric_names,
                dict(study.user_attrs),
            )
    finally:
        storage.engine.dispose()


def read_only_url(url: str) -> tuple[str, dict[str, Any]]:
    """The URL and engine options that open the storage ``url`` read-only; a SQLite file
    that does not exist or is not a database is an error here, before anything opens it."""
    if not isinstance(url, str) or not url.strip():
        raise AboError("optuna_storage: expected a storage URL such as sqlite:///optuna.db",
                       field="optuna_storage")  # fmt: skip
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - SQLAlchemy's ArgumentError or ValueError
        raise AboError(
            f"optuna_storage: {url!r} is not a storage URL (such as sqlite:///optuna.db or "
            "postgresql://user@host/db)",
            field="optuna_storage",
        ) from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = _sqlite_file(parsed.database)
        return f"sqlite:///file:{quote(path)}?mode=ro&uri=true", {}
    if backend == "postgresql" and parsed.get_driver_name() in ("psycopg", "psycopg2"):
        return url, {"connect_args": {"options": "-c default_transaction_read_only=on"}}
    return url, {}


def _sqlite_file(database: str | None) -> str:
    """The absolute path of an existing SQLite file named by a URL's database part."""
    path = (database or "").strip()
    if path.startswith("file:"):  # already a URI: its path, without its options
        path = path[len("file:") :].partition("?")[0]
    if not path or path == ":memory:":
        raise AboError("optuna_storage: an in-memory SQLite database holds no Optuna study; "
                       "name the file (sqlite:///optuna.db)", field="optuna_storage")  # fmt: skip
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise AboError(f"optuna_storage: {path} does not exist (an import creates nothing)",
                       field="optuna_storage")  # fmt: skip
    if not os.path.isfile(path):
        raise AboError(f"optuna_storage: {path} is not a file", field="optuna_storage")
    try:
        with open(path, "rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise AboError(f"optuna_storage: {path} cannot be read ({exc.strerror})",
                       field="optuna_storage") from None  # fmt: skip
    if not header:
        raise AboError(f"optuna_storage: {path} is empty, not an Optuna storage",
                       field="optuna_storage")  # fmt: skip
    if header != SQLITE_HEADER:
        raise AboError(f"optuna_storage: {path} is not a SQLite database",
                       field="optuna_storage")  # fmt: skip
    return path


def _check_tables(ro_url: str, engine_kwargs: dict[str, Any], url: str) -> None:
    """Refuse a database without Optuna's tables or their version rows (Optuna would create
    or stamp them)."""
    import sqlalchemy as sa

    engine = sa.create_engine(ro_url, **engine_kwargs)
    try:
        with engine.connect() as conn:
            tables = set(sa.inspect(conn).get_table_names())
            missing = [t for t in OPTUNA_TABLES if t not in tables]
            if missing:
                what = "an abo database" if all(t in tables for t in ABO_TABLES) else (
                    "an empty database" if not tables else "another program's database"
                )  # fmt: skip
                raise AboError(
                    f"optuna_storage: {_safe(url)} is not an Optuna storage ({what}: no "
                    f"table {missing[0]!r})",
                    field="optuna_storage",
                )
            for table in ("version_info", "alembic_version"):
                if conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table}").scalar() == 0:
                    raise AboError(
                        f"optuna_storage: {_safe(url)} is not a complete Optuna storage (its "
                        f"table {table!r} is empty)",
                        field="optuna_storage",
                    )
    finally:
        engine.dispose()
