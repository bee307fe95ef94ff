"""API keys in Postgres: their grants and the hash of their token, never the token.
`ApiKeys` is the contract the HTTP side and the key command use."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, cast

import asyncpg

from processors.api.access import Caller, Permission, hash_token, token_of
from stores.postgres.rows import create_pool


@dataclass(frozen=True)
class KeyGrant:
    """What a new key may do."""

    namespace: str | None
    permissions: frozenset[Permission]
    agent_id: str | None = None
    label: str = ""


@dataclass(frozen=True)
class StoredKey:
    key_id: str
    token_hash: str
    caller: Caller
    label: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class MadeKey:
    """A key just made: its token, which is not kept and is shown this once."""

    token: str
    key: StoredKey


class ApiKeys(Protocol):
    async def make_key(self, grant: KeyGrant) -> MadeKey: ...

    async def key(self, key_id: str) -> StoredKey | None: ...

    async def keys(self, namespace: str | None) -> list[StoredKey]:
        """The keys of `namespace` (None: every key), newest first."""

    async def revoke(self, key_id: str) -> StoredKey | None:
        """Revoke a key (a revoked one stays revoked when it was); None if unknown."""

    async def any_key(self) -> bool: ...


_COLUMNS = "key_id, token_hash, namespace, permissions, agent_id, label, created_at, revoked_at"


class PostgresApiKeys:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @classmethod
    async def connect(cls, dsn: str) -> PostgresApiKeys:
        """Keys on a pool of their own, for the key command."""
        return cls(await create_pool(dsn, max_size=1))

    async def close(self) -> None:
        await self._pool.close()

    async def make_key(self, grant: KeyGrant) -> MadeKey:
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        token = token_of(key_id, secret)
        row = await self._pool.fetchrow(
            f"INSERT INTO api_keys (key_id, token_hash, namespace, permissions, agent_id,"
            f" label) VALUES ($1, $2, $3, $4, $5, $6) RETURNING {_COLUMNS}",
            key_id, hash_token(token), grant.namespace, sorted(grant.permissions),
            grant.agent_id, grant.label)
        return MadeKey(token, _stored(row))

    async def key(self, key_id: str) -> StoredKey | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = $1", key_id)
        return None if row is None else _stored(row)

    async def keys(self, namespace: str | None) -> list[StoredKey]:
        rows = await self._pool.fetch(
            f"SELECT {_COLUMNS} FROM api_keys WHERE $1::text IS NULL OR namespace = $1"
            " ORDER BY created_at DESC, key_id", namespace)
        return [_stored(row) for row in rows]

    async def revoke(self, key_id: str) -> StoredKey | None:
        row = await self._pool.fetchrow(
            f"UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())"
            f" WHERE key_id = $1 RETURNING {_COLUMNS}", key_id)
        return None if row is None else _stored(row)

    async def any_key(self) -> bool:
        return bool(await self._pool.fetchval("SELECT EXISTS (SELECT 1 FROM api_keys)"))


def _stored(row: asyncpg.Record) -> StoredKey:
    caller = Caller(row["key_id"], row["namespace"],
                    frozenset(cast(Permission, p) for p in row["permissions"]), row["agent_id"])
    return StoredKey(row["key_id"], row["token_hash"], caller, row["label"], row["created_at"],
                     row["revoked_at"])
