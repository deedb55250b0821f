"""The texture store's SQLite database: its schema (one table of textures, one of settings) and how a connection is
opened (WAL mode, 16 KiB pages, a busy timeout).  The store's guarantees are :mod:`.store`'s."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..core.errors import StoreError

DB_NAME = "textures.sqlite"
SCHEMA_VERSION = 1
PAGE_SIZE = 16384

_SCHEMA = """
CREATE TABLE IF NOT EXISTS textures (
    id TEXT NOT NULL,                -- Texture.id: content hash prefix + config hash
    format_version INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    preset TEXT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    levels INTEGER NOT NULL,
    meta TEXT NOT NULL,              -- JSON: channels, groups, absent, config
    encode_ms REAL NOT NULL,
    size INTEGER NOT NULL,           -- bytes of data
    sha256 TEXT NOT NULL,            -- of data
    created REAL NOT NULL,
    last_access REAL NOT NULL,
    data BLOB NOT NULL,              -- last, so reading the columns above never touches the blob's pages
    PRIMARY KEY (content_hash, config_hash, format_version)
);
CREATE UNIQUE INDEX IF NOT EXISTS textures_id ON textures (id, format_version);
CREATE INDEX IF NOT EXISTS textures_lru ON textures (last_access);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_TABLES = ("textures", "settings")


def open_connection(db_path: Path, timeout: float) -> sqlite3.Connection:
    """A connection to the store's database in WAL mode, its schema made on first use and its tables checked."""
    conn = sqlite3.connect(db_path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        # 16 KiB pages (only takes effect when the file is created): a multi-MB blob is a quarter of the
        # overflow pages, and the default WAL auto-checkpoint (1000 pages) comes every few puts, not every
        # put (`foveate store bench`, BENCHMARKS.md: 4 KiB pages made a 3.5 MB put ~3x slower)
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: a killed process loses nothing committed
        if mode.lower() != "wal":
            raise StoreError(
                f"{db_path}: cannot switch to WAL mode (got {mode!r}); is the folder on a "
                "network file system? Put the store on a local disk"
            )
        init_schema(conn, db_path)
        check_tables(conn, db_path)
    except BaseException:
        conn.close()
        raise
    return conn


def init_schema(conn: sqlite3.Connection, db_path: Path) -> None:
    """Create the tables of :data:`SCHEMA_VERSION` in a new database; refuse another version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version not in (0, SCHEMA_VERSION):
        raise StoreError(
            f"{db_path} has store schema {version}; this foveate reads schema "
            f"{SCHEMA_VERSION}: use another folder, or move this one away"
        )
    conn.execute("BEGIN IMMEDIATE")
    try:
        for stmt in filter(str.strip, _SCHEMA.split(";")):
            conn.execute(stmt)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def check_tables(conn: sqlite3.Connection, db_path: Path) -> None:
    """Refuse a database of this schema version without the store's tables (a foreign file, a dropped table):
    one :class:`StoreError` when the store is opened, not an SQLite error at its first query."""
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [t for t in _TABLES if t not in tables]
    if missing:
        raise StoreError(
            f"{db_path.parent} is not a foveate store or is damaged: {db_path.name} has no table "
            f"{' or '.join(missing)}; move it away or pass another folder"
        )
