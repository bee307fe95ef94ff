"""Who a request comes from: the key of its `Authorization: Bearer` header, looked up on
every request, so that a revoked key stops working at once on every worker.

While Postgres is down, a key this worker verified within the last `LAST_KNOWN_S` is taken
as it was then: reads fail open (memory must not make its caller fail), and no key can be
revoked meanwhile, since revoking writes to the same Postgres.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from processors.api.access import (
    NOBODY_CHECKED,
    Caller,
    KeysUnavailable,
    Permission,
    Unauthenticated,
    parse_token,
    same_hash,
)
from processors.api.parameters import IDENTIFIER, NAMESPACE
from stores.api_keys import ApiKeys
from stores.record_versions import PersonalReader
from stores.records import Records
from streams.api.params import optional, required

log = logging.getLogger(__name__)

LAST_KNOWN_S = 600.0


class Authenticator:
    def __init__(self, keys: ApiKeys, *, enabled: bool) -> None:
        self._keys = keys
        self._enabled = enabled
        # key id -> (token hash, grants, when verified): for while Postgres is down.
        self._verified: dict[str, tuple[str, Caller, float]] = {}
        if not enabled:
            log.warning("MEMSTREAM_AUTH=off: every HTTP request may read and change every "
                        "namespace without a key. For local use only.")

    async def caller(self, authorization: str | None) -> Caller:
        """The grants of the request's key; raises `Unauthenticated`, or `KeysUnavailable`.
        The key id is named in errors, never the token."""
        if not self._enabled:
            return NOBODY_CHECKED
        key_id, presented = parse_token(authorization)
        try:
            stored = await self._keys.key(key_id)
        except Exception as exc:
            return self._last_known(key_id, presented, exc)
        if stored is None or not same_hash(stored.token_hash, presented):
            raise Unauthenticated("unknown", "unknown API key")
        if stored.revoked_at is not None:
            self._verified.pop(key_id, None)
            raise Unauthenticated("revoked", f"key {key_id} was revoked")
        self._verified[key_id] = (stored.token_hash, stored.caller, time.monotonic())
        return stored.caller

    def _last_known(self, key_id: str, presented: str, exc: Exception) -> Caller:
        known = self._verified.get(key_id)
        if known is None or not same_hash(known[0], presented) or \
                time.monotonic() - known[2] > LAST_KNOWN_S:
            raise KeysUnavailable(f"cannot check key {key_id} now: {type(exc).__name__}")
        log.warning("keys unavailable (%s); key %s taken as verified %.0fs ago",
                    type(exc).__name__, key_id, time.monotonic() - known[2])
        return known[1]


def granted_namespace(caller: Caller, params: Mapping[str, str],
                      permission: Permission = "read") -> str:
    """The request's namespace, once the caller's key may do `permission` in it."""
    namespace = required(params, "namespace", NAMESPACE)
    caller.check(permission, namespace)
    return namespace


def reader_of(caller: Caller, params: Mapping[str, str]) -> str | None:
    """The agent whose personal memories a search returns: the key's, never another."""
    return caller.reader_of(optional(params, "agent_id", IDENTIFIER))


def personal_reader(caller: Caller, params: Mapping[str, str]) -> PersonalReader:
    """Whose personal records a listing shows: a key bound to an agent, its agent's; an admin
    key bound to none, every agent's, or the one agent the request names."""
    requested = optional(params, "agent_id", IDENTIFIER)
    return PersonalReader(caller.reader_of(requested),
                          every_agent=caller.oversees_agents and requested is None)


async def may_see(records: Records, caller: Caller, namespace: str, record_id: str) -> bool:
    """Whether the record exists and the caller may see it: both are answered alike, so that
    a caller cannot tell another agent's memory from no memory."""
    record = (await records.records_by_id(namespace, [record_id])).get(record_id)
    return record is not None and caller.sees(record.scope, record.agent_id)
