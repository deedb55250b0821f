"""The texture store: encoded textures persisted on disk and shared by threads and processes.

A store is a folder holding one SQLite database, ``textures.sqlite``, in WAL mode.  Every texture is one row:
its ``.fvt`` bytes (``Texture.to_bytes``) as a blob, their SHA-256, and the metadata ``ls`` and the service
show without reading the blob.  Why SQLite and not LMDB or one file per texture: docs/store.md ("Why SQLite"),
measured by ``foveate store bench`` (BENCHMARKS.md, "Store: SQLite (WAL) vs LMDB vs one file per texture").

    store = TextureStore("textures/", max_bytes=2 << 30)
    entry, created = store.put(foveate.encode("page.png"))
    tex = store.get(entry.id)          # None when absent (or found corrupt and dropped)

Guarantees:

* **content-addressed**: the key is (image content hash, ``EncodeConfig.hash()``, ``FORMAT_VERSION``); the
  public id is ``Texture.id`` (content hash + config hash) and only entries of this format version are served.
* **atomic**: a put (insert + evictions) is one transaction.  A process killed mid-write leaves the store as
  before the put; SQLite rolls the partial transaction back when the store is next opened.
* **concurrent**: any number of reader and writer threads and processes.  In WAL mode readers never block and
  are never blocked; writers take turns on a lock and wait up to ``timeout`` seconds for it.
* **bounded**: ``max_bytes`` caps the sum of blob sizes; each put evicts the least recently used entries (by
  last read or write) in its own transaction.  The cap is saved in the store, so every process honours it.
* **verified**: every read re-hashes the blob; a mismatch (bit rot, a hand-edited file) drops the entry and
  the read returns ``None`` -- the caller encodes again; nothing corrupt is ever served.  A row whose metadata
  cannot be read is treated the same way: a read drops it, a put replaces it, a listing skips it, ``gc`` drops it.
* **one error type**: an SQLite error inside a public method (a damaged or foreign database file, a lock held too
  long) leaves it as one :class:`StoreError` naming the store, never as ``sqlite3``'s own exception.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from ..core.errors import StoreError, StoreFullError, TextureFormatError
from ..core.fvt import FORMAT_VERSION
from .records import _COLUMNS, DamagedRecord, GcReport, StoreCounters, StoreEntry, file_name, texture_blob
from .sqlite import DB_NAME, open_connection

if TYPE_CHECKING:  # listing and maintaining a store needs neither torch nor the texture code
    import torch

    from ..core.texture import Texture

P = ParamSpec("P")
R = TypeVar("R")


def _guarded(method: Callable[Concatenate[TextureStore, P], R]) -> Callable[Concatenate[TextureStore, P], R]:
    """The store's boundary: an SQLite error inside ``method`` leaves it as one :class:`StoreError`
    (:meth:`TextureStore._guard`)."""

    @functools.wraps(method)
    def guarded(self: TextureStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._guard():
            return method(self, *args, **kwargs)

    return guarded


def check_cap(max_bytes: float, given: str | None = None) -> int:
    """A size cap in whole bytes; a :class:`StoreError` unless it is a finite number >= 0 (NaN passes ``< 0``, then
    fails as ``int(nan)``).  ``given``: how the caller's user wrote it, for the message (default: the bytes)."""
    if not (math.isfinite(max_bytes) and max_bytes >= 0):
        shown = given if given is not None else f"{max_bytes} bytes"
        raise StoreError(f"the store size cap must be a finite number >= 0 (0 = no cap), got {shown}")
    return int(max_bytes)


class TextureStore:
    """A content-addressed texture store in the folder ``path`` (created if missing unless ``create=False``).

    Args:
        path: the store folder.
        max_bytes: cap on the sum of blob sizes (LRU eviction); saved in the store.  ``None`` keeps the saved
            cap (none for a new store); ``0`` removes it.
        touch_interval: a read records a new last-access time only when the stored one is older than this many
            seconds; recorded times are written in one batch at most every ``touch_interval`` seconds, never by
            waiting for the write lock (:meth:`flush_touches`), and by every write transaction.
        timeout: seconds a writer waits for the write lock before ``StoreError``.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        max_bytes: int | None = None,
        *,
        touch_interval: float = 5.0,
        timeout: float = 30.0,
        create: bool = True,
    ) -> None:
        self.path = Path(path)
        self.db_path = self.path / DB_NAME
        self.touch_interval = float(touch_interval)
        self.timeout = float(timeout)
        self.counters = StoreCounters()
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._touches: dict[int, float] = {}  # rowid -> last read time, not yet written
        self._touch_lock = threading.Lock()
        self._touch_flushed = time.monotonic()
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{self.path} is a file, not a store folder; pass a folder path")
        if not self.db_path.exists():
            if not create:
                raise StoreError(
                    f"no texture store at {self.path} (no {DB_NAME}); create one with "
                    "`foveate encode --store DIR IMAGES...`"
                )
            try:
                self.path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the store folder {self.path}: {exc.strerror or exc}") from exc
        self._conn()  # open (and on first use create) the database now, so a bad path fails here
        if max_bytes is not None:
            self.set_max_bytes(max_bytes)

    # -- connections ---------------------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        """This thread's connection (one per thread and process; a forked child opens its own)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn = self._open()
                break
            except sqlite3.OperationalError as exc:
                # several processes opening a new store at once: switching it to WAL needs an exclusive lock, and
                # SQLite answers "locked" at once instead of waiting (seen with 3 processes on a new folder), so retry
                if "locked" not in str(exc):
                    raise StoreError(
                        f"{self.db_path} is not a usable texture store ({exc}); move it away or pass another folder"
                    ) from exc
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"{self.path}: the store stayed locked for {self.timeout:g} s while opening it "
                        f"({exc}); retry, or raise the timeout"
                    ) from exc
                time.sleep(0.01 + 0.04 * random.random())
            except sqlite3.DatabaseError as exc:
                raise StoreError(
                    f"{self.db_path} is not a usable texture store ({exc}); move it away or pass another folder"
                ) from exc
        self._local.conn, self._local.pid = conn, os.getpid()
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        return open_connection(self.db_path, self.timeout)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn an SQLite error into a :class:`StoreError` naming the store: a damaged or foreign database (a table
        dropped, pages overwritten) or a lock held past ``timeout`` is the user's to fix, not a traceback."""
        try:
            yield
        except sqlite3.ProgrammingError:
            raise  # a misuse (a closed store, a bad statement): a bug to see as it is, not damage
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise StoreError(
                    f"{self.path}: the store stayed locked for {self.timeout:g} s ({exc}); retry, or raise the timeout"
                ) from exc
            raise StoreError(
                f"{self.path} is not a foveate store or is damaged: {exc}; move it away or pass another folder"
            ) from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: the write lock is taken at once (no upgrade deadlocks), committed on success,
        rolled back on any error -- and by SQLite itself if the process dies inside it."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreError(
                f"{self.path}: the store stayed locked for {self.timeout:g} s ({exc}); retry, or raise the timeout"
            ) from exc
        try:
            self._write_touches(conn, self._take_touches())  # we hold the lock anyway: the LRU clock rides along
            yield conn
        except BaseException:
            if conn.in_transaction:  # SQLite itself rolls back on some errors (a full disk, an I/O error)
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this object opened (in any thread), writing recorded reads if the write lock
        is free."""
        self.flush_touches()
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()

    def __enter__(self) -> TextureStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- settings ------------------------------------------------------------------------------------------
    @property
    @_guarded
    def max_bytes(self) -> int:
        """The cap on the sum of blob sizes (0 = none)."""
        return self._cap(self._conn())

    @_guarded
    def set_max_bytes(self, max_bytes: int) -> int:
        """Save a new cap and evict down to it at once.  Returns the number of entries evicted."""
        with self._write() as conn:
            self._save_cap(conn, max_bytes)
            return self._evict(conn, max_bytes)

    @staticmethod
    def _save_cap(conn: sqlite3.Connection, max_bytes: int) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO settings (key, value) VALUES ('max_bytes', ?)", (str(check_cap(max_bytes)),)
        )

    # -- reads ---------------------------------------------------------------------------------------------
    @_guarded
    def entry(self, texture_id: str) -> StoreEntry | None:
        """Metadata of a stored texture (reads no blob), or ``None`` when absent or its metadata is unreadable
        (then the row is dropped, as a corrupt blob is: the caller encodes again)."""
        row = (
            self._conn()
            .execute(
                f"SELECT {_COLUMNS} FROM textures WHERE id = ? AND format_version = ?", (texture_id, FORMAT_VERSION)
            )
            .fetchone()
        )
        if row is None:
            return None
        try:
            return StoreEntry._from_row(row)
        except DamagedRecord:
            with self._write() as conn:  # checked again under the lock: another process may have replaced it
                self.counters.add(corrupt=self._drop_damaged(conn, texture_id))
            return None

    def __contains__(self, texture_id: str) -> bool:
        """Whether a readable entry is stored (one with unreadable metadata is dropped: ``encode --store`` then
        encodes the image again instead of skipping it)."""
        return self.entry(texture_id) is not None

    @_guarded
    def get_bytes(self, texture_id: str) -> bytes | None:
        """The verified ``.fvt`` bytes of a texture, or ``None`` when absent or found corrupt (then dropped)."""
        data = self._read(texture_id)
        self.counters.add(hits=int(data is not None), misses=int(data is None))
        return data

    @_guarded
    def get(self, texture_id: str, device: str | torch.device | None = "cpu") -> Texture | None:
        """The stored texture (its bytes verified), or ``None`` when absent or found corrupt (then dropped)."""
        data = self._read(texture_id)
        tex = None
        if data is not None:
            from ..core.texture import Texture

            try:
                # the SHA-256 already proved these are the bytes written: no second hash of the pixels
                tex = Texture.from_bytes(data, device=device, verify=False, name=f"store:{texture_id}")
            except TextureFormatError:
                self.delete(texture_id)
                self.counters.add(corrupt=1)
        self.counters.add(hits=int(tex is not None), misses=int(tex is None))
        return tex

    def _read(self, texture_id: str) -> bytes | None:
        conn = self._conn()
        row = conn.execute(
            "SELECT rowid, sha256, last_access, data FROM textures WHERE id = ? AND format_version = ?",
            (texture_id, FORMAT_VERSION),
        ).fetchone()
        if row is None:
            return None
        rowid, digest, last_access, data = row
        if hashlib.sha256(data).hexdigest() != digest:
            self._drop_corrupt(rowid)
            return None
        now = time.time()
        if now - last_access > self.touch_interval:
            # readers never wait: the last-access time is recorded here and written later, in a batch
            with self._touch_lock:
                self._touches[rowid] = now
                due = time.monotonic() - self._touch_flushed >= self.touch_interval
            if due:
                self.flush_touches()
        return data

    # -- the LRU clock -------------------------------------------------------------------------------------
    def _take_touches(self) -> dict[int, float]:
        with self._touch_lock:
            batch, self._touches = self._touches, {}
            self._touch_flushed = time.monotonic()
        return batch

    @staticmethod
    def _write_touches(conn: sqlite3.Connection, batch: dict[int, float]) -> None:
        if batch:
            conn.executemany(
                "UPDATE textures SET last_access = MAX(last_access, ?) WHERE rowid = ?",
                [(t, r) for r, t in batch.items()],
            )

    def flush_touches(self) -> int:
        """Write the last-access times reads recorded, in one transaction -- only if the write lock is free at
        once (best effort: the LRU clock never makes a reader wait; what is not written now is kept for the
        next flush or write).  Returns how many were written."""
        batch = self._take_touches()
        if not batch:
            return 0
        conn = self._conn()
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self._write_touches(conn, batch)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        except sqlite3.Error:
            with self._touch_lock:  # another process writes: keep them for later
                for rowid, t in batch.items():
                    self._touches[rowid] = max(t, self._touches.get(rowid, 0.0))
            return 0
        return len(batch)

    def _drop_corrupt(self, rowid: int) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM textures WHERE rowid = ?", (rowid,))
        self.counters.add(corrupt=1)

    @_guarded
    def entries(self, order: str = "last_access", *, damaged: list[str] | None = None) -> list[StoreEntry]:
        """Every entry of any format version, most recently used first (``order``: last_access, size, created).
        A row whose metadata cannot be read is skipped (a listing writes nothing; ``gc`` drops it), its id appended
        to ``damaged`` when given."""
        col = {"last_access": "last_access DESC", "size": "size DESC", "created": "created DESC"}.get(order)
        if col is None:
            raise StoreError(f"unknown order {order!r}; use last_access, size or created")
        found = []
        for row in self._conn().execute(f"SELECT {_COLUMNS} FROM textures ORDER BY {col}"):
            try:
                found.append(StoreEntry._from_row(row))
            except DamagedRecord:
                if damaged is not None:
                    damaged.append(row[0])
        return found

    @_guarded
    def stats(self) -> dict:
        """Entries, blob bytes, cap, file bytes on disk, entries per format version."""
        conn = self._conn()
        n, total = conn.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM textures").fetchone()
        versions = dict(conn.execute("SELECT format_version, COUNT(*) FROM textures GROUP BY format_version"))
        return {
            "path": str(self.path),
            "entries": n,
            "bytes": total,
            "max_bytes": self.max_bytes,
            "file_bytes": self.file_bytes(),
            "format_versions": versions,
            "format_version": FORMAT_VERSION,
            "counters": self.counters.to_dict(),
        }

    def file_bytes(self) -> int:
        """Bytes the store occupies on disk (database + WAL + shared-memory index)."""
        return sum(p.stat().st_size for p in self.path.glob(DB_NAME + "*") if p.is_file())

    def ids(self) -> Iterator[str]:
        with self._guard():
            for (i,) in self._conn().execute("SELECT id FROM textures WHERE format_version = ?", (FORMAT_VERSION,)):
                yield i

    @_guarded
    def match_ids(self, prefix: str, limit: int | None = None) -> list[str]:
        """The ids of this format version that start with ``prefix``, sorted (at most ``limit``): the id index."""
        sql = "SELECT id FROM textures WHERE id >= ? AND id < ? AND format_version = ? ORDER BY id"
        args: tuple = (prefix, prefix + "\U0010ffff", FORMAT_VERSION)
        if limit is not None:
            sql, args = sql + " LIMIT ?", (*args, int(limit))
        return [i for (i,) in self._conn().execute(sql, args)]

    def resolve_id(self, prefix: str) -> str:
        """The id of the one stored texture that ``prefix`` starts (a whole id, or enough of one: as git takes a
        commit); then :meth:`get` reads it.  :class:`StoreError` when none or several match, naming them."""
        prefix = prefix.strip()
        if not prefix:
            raise StoreError("give a texture id (or its first characters); `foveate store ls` lists them")
        found = [prefix] if prefix in self else self.match_ids(prefix, limit=6)
        if len(found) == 1:
            return found[0]
        if not found:
            raise StoreError(f"no texture {prefix} in {self.path}; `foveate store ls` lists them")
        many, shown = (
            ("more than 5", ", ".join(found[:5]) + ", ...") if len(found) > 5 else (len(found), ", ".join(found))
        )
        raise StoreError(f"{prefix} starts {many} textures in {self.path} ({shown}); give more of the id")

    # -- writes --------------------------------------------------------------------------------------------
    @_guarded
    def put(
        self, texture: Texture, blob: tuple[bytes, str] | None = None, *, source: str | os.PathLike | None = None
    ) -> tuple[StoreEntry, bool]:
        """Store ``texture`` unless an entry with its key exists.  Returns (entry, created).

        ``blob`` is ``texture_blob(texture)`` when the caller already has it.  ``source``: the path or URI of the
        image it was encoded from; the entry records its file name only (``StoreEntry.source``; an entry that
        exists keeps the name it has).  Serialising and hashing happen before the write lock is taken; the insert
        and the evictions it causes are one transaction.  A stored row of this id whose metadata cannot be read
        is replaced.
        """
        data, digest = blob if blob is not None else texture_blob(texture)
        h, w = texture.image_size
        name = file_name(source)
        meta = json.dumps(
            {
                "channels": list(texture.channels),
                "absent": list(texture.absent),
                "groups": {k: list(v) for k, v in texture.groups.items()},
                "config": texture.config.to_dict(),
                **({"source": name} if name is not None else {}),  # an entry of an older foveate has none
            }
        )
        now = time.time()
        with self._write() as conn:
            cap = self._cap(conn)
            if cap and len(data) > cap:
                raise StoreFullError(texture.id, len(data), cap)
            damaged = self._drop_damaged(conn, texture.id)
            cur = conn.execute(
                "INSERT OR IGNORE INTO textures (id, format_version, content_hash, config_hash, preset, width, "
                "height, levels, meta, encode_ms, size, sha256, created, last_access, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    texture.id,
                    FORMAT_VERSION,
                    texture.content_hash,
                    texture.config.hash(),
                    texture.config.preset,
                    w,
                    h,
                    texture.num_levels,
                    meta,
                    float(texture.timings_ms.get("total", 0.0)),
                    len(data),
                    digest,
                    now,
                    now,
                    sqlite3.Binary(data),
                ),
            )
            created = cur.rowcount == 1
            if not created:  # already stored: a write counts as a use
                conn.execute(
                    "UPDATE textures SET last_access = ? WHERE id = ? AND format_version = ?",
                    (now, texture.id, FORMAT_VERSION),
                )
            evicted = self._evict(conn, cap, keep=texture.id) if created and cap else 0
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM textures WHERE id = ? AND format_version = ?", (texture.id, FORMAT_VERSION)
            ).fetchone()
        self.counters.add(puts=int(created), duplicates=int(not created), evictions=evicted, corrupt=damaged)
        return StoreEntry._from_row(row), created

    def _cap(self, conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT value FROM settings WHERE key = 'max_bytes'").fetchone()
        if row is None:
            return 0
        try:
            cap = int(row[0])
        except (TypeError, ValueError):
            cap = -1
        if cap < 0:
            # refused, not guessed: the cap bounds the disk the store may fill -- "no cap" could fill it unseen, any
            # other number could evict textures someone wants; saving a new cap (gc --max-mb, serve
            # --store-max-mb) never reads this one, so the fix the message names works
            raise StoreError(
                f"{self.path}: the store setting max_bytes (its size cap) is {row[0]!r}, not a whole number of "
                f"bytes >= 0; set it again with `foveate store gc -s {self.path} --max-mb N` (0 = no cap)"
            )
        return cap

    @staticmethod
    def _blob_bytes(conn: sqlite3.Connection) -> int:
        return conn.execute("SELECT COALESCE(SUM(size), 0) FROM textures").fetchone()[0]

    @staticmethod
    def _drop_damaged(conn: sqlite3.Connection, texture_id: str | None = None) -> int:
        """Delete the rows (of ``texture_id``, of this format version; else every row) whose metadata cannot be
        read, inside the caller's transaction.  Returns how many."""
        sql = f"SELECT {_COLUMNS} FROM textures"
        args: tuple = ()
        if texture_id is not None:
            sql, args = sql + " WHERE id = ? AND format_version = ?", (texture_id, FORMAT_VERSION)
        bad = []
        for row in conn.execute(sql, args):
            try:
                StoreEntry._from_row(row)
            except DamagedRecord:
                bad.append((row[0], row[1]))
        conn.executemany("DELETE FROM textures WHERE id = ? AND format_version = ?", bad)
        return len(bad)

    @staticmethod
    def _evict(conn: sqlite3.Connection, cap: int, keep: str | None = None) -> int:
        """Delete least recently used entries until the blobs fit in ``cap`` (inside the caller's transaction)."""
        if not cap:
            return 0
        total = TextureStore._blob_bytes(conn)
        evicted = 0
        if total <= cap:
            return 0
        victims = conn.execute("SELECT rowid, size, id FROM textures ORDER BY last_access ASC, rowid ASC").fetchall()
        for rowid, size, tid in victims:
            if total <= cap:
                break
            if tid == keep:
                continue
            conn.execute("DELETE FROM textures WHERE rowid = ?", (rowid,))
            total -= size
            evicted += 1
        return evicted

    @_guarded
    def delete(self, texture_id: str) -> bool:
        """Remove a texture (every format version of it).  Returns whether there was one."""
        with self._write() as conn:
            return conn.execute("DELETE FROM textures WHERE id = ?", (texture_id,)).rowcount > 0

    @_guarded
    def clear(self) -> int:
        """Remove every entry and shrink the file.  Returns the number removed."""
        with self._write() as conn:
            n = conn.execute("DELETE FROM textures").rowcount
        self._compact()
        return n

    @_guarded
    def verify(self) -> list[str]:
        """Re-hash every blob and drop the corrupt ones (also runs SQLite's integrity check).  Returns their ids."""
        conn = self._conn()
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise StoreError(
                f"{self.db_path}: SQLite reports damage ({check}); copy what `foveate store ls` "
                "still lists and rebuild the store"
            )
        bad = []
        for rowid, tid in conn.execute("SELECT rowid, id FROM textures").fetchall():
            row = conn.execute("SELECT sha256, data FROM textures WHERE rowid = ?", (rowid,)).fetchone()
            if row is not None and hashlib.sha256(row[1]).hexdigest() != row[0]:
                self._drop_corrupt(rowid)
                bad.append(tid)
        return bad

    @_guarded
    def gc(self, verify: bool = False, max_bytes: int | None = None) -> GcReport:
        """Drop entries of other format versions (unreadable) and rows whose metadata cannot be read, optionally
        corrupt blobs (``verify``), save a new cap (``max_bytes``), evict to the cap, and give freed space back to
        the file system."""
        rep = GcReport(bytes_before=self._blob_bytes(self._conn()), file_bytes_before=self.file_bytes())
        with self._write() as conn:
            if max_bytes is not None:
                self._save_cap(conn, max_bytes)  # before the saved cap is read: a new one repairs a damaged one
            rep.other_versions = conn.execute(
                "DELETE FROM textures WHERE format_version != ?", (FORMAT_VERSION,)
            ).rowcount
            rep.corrupt = self._drop_damaged(conn)
            rep.evicted = self._evict(conn, self._cap(conn))
        self.counters.add(corrupt=rep.corrupt)
        if verify:
            rep.corrupt += len(self.verify())
        self._compact()
        rep.bytes_after, rep.file_bytes_after = self._blob_bytes(self._conn()), self.file_bytes()
        return rep

    def _compact(self) -> None:
        conn = self._conn()
        try:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.OperationalError:
            pass  # another process is busy with the store: space is reused anyway, the file shrinks next time
