"""Versioned SQL migrations: `stores/postgres/migrations/NNNN_name.sql`, applied in order, once
each.

    python -m stores.postgres.migrate [--dsn DSN]

DSN: `--dsn`, else `$MEMSTREAM_PG_DSN`, else the local server's (stores.postgres.local_server).

Each file runs in its own transaction together with its row in `schema_migrations`, so a
failing migration leaves nothing behind (hence: no `CREATE INDEX CONCURRENTLY` in migrations).
A session-level advisory lock serialises concurrent runs: when several workers start together,
one applies, the others wait and then find nothing left to do. A migration that was edited
after being applied is an error, not a silent drift between databases.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
DSN_ENV = "MEMSTREAM_PG_DSN"
# Any fixed 64-bit key works; this one is "memstrm1" in ASCII, unlikely to collide.
ADVISORY_LOCK_KEY = 0x6D656D7374726D31  # fits a signed bigint
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    text PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(RuntimeError):
    """A migration file is malformed, was changed after being applied, or failed."""


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.version}_{self.name}"


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The migration files of `directory`, sorted by version; malformed names are errors."""
    migrations: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_NAME.match(path.name)
        if match is None:
            raise MigrationError(f"{path.name}: expected a name like 0002_add_things.sql")
        migrations.append(Migration(match[1], match[2], path.read_text(encoding="utf-8")))
    versions = [m.version for m in migrations]
    duplicates = sorted({v for v in versions if versions.count(v) > 1})
    if duplicates:
        raise MigrationError(f"several migrations share the version(s) {duplicates}")
    return migrations


async def apply_migrations(dsn: str, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply the migrations the database lacks; return their labels (e.g. `0001_init`)."""
    migrations = load_migrations(directory)
    connection: asyncpg.Connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("SELECT pg_advisory_lock($1)", ADVISORY_LOCK_KEY)
        try:
            return await _apply_locked(connection, migrations)
        finally:
            await connection.execute("SELECT pg_advisory_unlock($1)", ADVISORY_LOCK_KEY)
    finally:
        await connection.close()


async def _apply_locked(connection: asyncpg.Connection, migrations: list[Migration]) -> list[str]:
    await connection.execute(_CREATE_TABLE)
    applied = {
        row["version"]: row["checksum"]
        for row in await connection.fetch("SELECT version, checksum FROM schema_migrations")
    }
    for migration in migrations:
        recorded = applied.get(migration.version)
        if recorded is not None and recorded != migration.checksum:
            raise MigrationError(
                f"{migration.label} changed after it was applied to this database; add a new "
                "migration instead (or, for a disposable dev database, delete its data directory)"
            )
    done: list[str] = []
    for migration in migrations:
        if migration.version in applied:
            continue
        try:
            async with connection.transaction():
                # No arguments: asyncpg uses the simple query protocol, which runs a whole
                # multi-statement script.
                await connection.execute(migration.sql)
                await connection.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version, migration.name, migration.checksum,
                )
        except asyncpg.PostgresError as exc:
            raise MigrationError(f"{migration.label} failed: {exc}") from exc
        done.append(migration.label)
    return done


def default_dsn() -> str:
    dsn = os.environ.get(DSN_ENV, "")
    if dsn:
        return dsn
    from stores.postgres.local_server import local_dsn

    return local_dsn()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stores.postgres.migrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=None, help=f"default: ${DSN_ENV}, else the local server")
    args = parser.parse_args(argv)
    dsn = args.dsn or default_dsn()
    try:
        applied = asyncio.run(apply_migrations(dsn))
    except MigrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (OSError, asyncpg.PostgresError) as exc:
        print(f"error: cannot reach Postgres at {dsn}: {exc}\n"
              "(local server: python -m stores.postgres.local_server start)", file=sys.stderr)
        return 1
    print("applied: " + ", ".join(applied) if applied else "up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
