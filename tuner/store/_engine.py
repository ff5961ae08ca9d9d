"""The store's database: an engine tuned for its backend, and its schema migrated by
Alembic when it opens."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.pool import StaticPool

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def open_engine(url: URL) -> Engine:
    """An engine tuned for the backend.

    SQLite gets WAL, a busy timeout and cross-thread use (one shared connection for an
    in-memory database); every backend gets strict JSON.

    Args:
        url: The database's URL; a SQLite file's folder is created if missing.

    Returns:
        The engine.
    """
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, json_serializer=_json_dumps)
    database = url.database or ""
    in_memory = database in ("", ":memory:") or "mode=memory" in str(url)
    if not in_memory and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        poolclass=StaticPool if in_memory else None,
        json_serializer=_json_dumps,
    )
    event.listen(engine, "connect", _on_sqlite_connect)
    return engine


def migrate(engine: Engine, url: URL) -> None:
    """Run `alembic upgrade head`, serialized across processes opening the store at once.

    Args:
        engine: The engine to migrate through.
        url: Its URL (Alembic's `sqlalchemy.url`).
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    rendered = url.render_as_string(hide_password=False).replace("%", "%%")
    config.set_main_option("sqlalchemy.url", rendered)
    with engine.connect() as connection:
        _lock_for_migration(connection)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        connection.commit()


def _jsonable(value: Any) -> Any:
    """Make a value strict JSON: NaN/inf become null, numpy values plain lists and numbers."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    if hasattr(value, "tolist"):  # numpy scalar or array
        return _jsonable(value.tolist())
    return str(value)


def _json_dumps(value: Any) -> str:
    """The engine's JSON serializer (strict JSON, so Postgres accepts what SQLite did)."""
    return json.dumps(_jsonable(value), allow_nan=False)


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    """Per-connection SQLite setup: wait for locks, WAL for concurrent readers, enforce FKs."""
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _lock_for_migration(connection: Connection) -> None:
    """Take a database-wide lock so concurrent openers migrate one at a time."""
    dialect = connection.dialect.name
    if dialect == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif dialect == "postgresql":
        connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7531902468)")
