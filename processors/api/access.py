"""Who may read and change what: API keys and the rules of their grants.

A key is a bearer token `msk_<key id>_<secret>`. The key id is public (listed, revoked, named
in logs); the secret is shown once, when the key is made, and only its SHA-256 is kept: the
token is 32 random bytes, so a fast hash is as good as a slow one and a lookup stays well
under a millisecond.

A key grants permissions within one namespace, or within all of them (an operator's key),
and may be bound to one agent. What a caller sees of personal memories follows from the
key alone, never from the request:

- a key bound to an agent reads that agent's personal memories and the shared ones;
- an admin key not bound to any agent reads any agent's, the one a request names;
- any other key reads the shared memories only.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Literal, get_args

Permission = Literal["read", "write", "review", "admin"]
PERMISSIONS: tuple[Permission, ...] = get_args(Permission)
# Why a request was not let in, as the failed-authentication metric counts it.
Failure = Literal["missing", "malformed", "unknown", "revoked", "forbidden", "unavailable"]

TOKEN_PREFIX = "msk_"
# A key's id, as its token carries it and as it is listed and revoked.
KEY_ID = re.compile(r"[0-9a-f]{12}")
_TOKEN = re.compile(rf"msk_({KEY_ID.pattern})_([A-Za-z0-9_-]{{43}})")


class AccessDenied(Exception):
    """A request that may not go on; `failure` says why, the message says it to the caller."""

    status: int = 403

    def __init__(self, failure: Failure, message: str) -> None:
        super().__init__(message)
        self.failure = failure


class Unauthenticated(AccessDenied):
    """No key, or not one that is valid now: 401."""

    status = 401


class KeysUnavailable(AccessDenied):
    """The key cannot be checked now (its store is down) and was not checked lately: 503."""

    status = 503

    def __init__(self, message: str) -> None:
        super().__init__("unavailable", message)


class Forbidden(AccessDenied):
    """A valid key, outside its grants: 403."""

    def __init__(self, message: str) -> None:
        super().__init__("forbidden", message)


@dataclass(frozen=True)
class Caller:
    """The grants of the key a request came with."""

    key_id: str
    # None: every namespace.
    namespace: str | None
    permissions: frozenset[Permission]
    agent_id: str | None

    def may(self, permission: Permission, namespace: str | None) -> bool:
        """Whether this key may do `permission` in `namespace` (None: in every namespace,
        which only an operator's key covers). Admin implies every other permission."""
        return (self.namespace is None or self.namespace == namespace) and (
            permission in self.permissions or "admin" in self.permissions)

    def check(self, permission: Permission, namespace: str) -> None:
        if not self.may(permission, namespace):
            raise Forbidden(f"key {self.key_id} may not {permission} in namespace "
                            f"{namespace!r}")

    @property
    def oversees_agents(self) -> bool:
        """An admin key bound to no agent: it reads every agent's personal memories."""
        return self.agent_id is None and "admin" in self.permissions

    def reader_of(self, requested_agent: str | None) -> str | None:
        """The agent whose personal memories a read returns beside the shared ones, given
        the agent a request names (or None)."""
        if self.agent_id is not None:
            if requested_agent not in (None, self.agent_id):
                raise Forbidden(f"key {self.key_id} is bound to agent {self.agent_id!r}")
            return self.agent_id
        if requested_agent is not None and not self.oversees_agents:
            raise Forbidden(f"key {self.key_id} reads no agent's personal memories; "
                            "use a key bound to the agent")
        return requested_agent

    def sees(self, scope: str, owner: str | None) -> bool:
        """Whether a record of this scope and owner may be shown to this caller at all (a
        read by id, its history, a diff of it)."""
        return scope != "personal" or self.oversees_agents or (
            self.agent_id is not None and owner == self.agent_id)

    def writer_for(self, agent_id: str | None) -> str | None:
        """The agent a write is made as: a bound key writes as its agent only."""
        if self.agent_id is not None and agent_id not in (None, self.agent_id):
            raise Forbidden(f"key {self.key_id} is bound to agent {self.agent_id!r}")
        return self.agent_id if self.agent_id is not None else agent_id


# The caller of every request when authentication is off (MEMSTREAM_AUTH=off).
NOBODY_CHECKED = Caller("auth-off", None, frozenset(PERMISSIONS), None)


def token_of(key_id: str, secret: str) -> str:
    return f"{TOKEN_PREFIX}{key_id}_{secret}"


def parse_token(header: str | None) -> tuple[str, str]:
    """The key id and the hash of the token in an `Authorization: Bearer` header."""
    if not header:
        raise Unauthenticated("missing", "an Authorization: Bearer <key> header is required")
    scheme, _, token = header.strip().partition(" ")
    match = _TOKEN.fullmatch(token.strip())
    if scheme.lower() != "bearer" or match is None:
        raise Unauthenticated("malformed", "expected Authorization: Bearer msk_<id>_<secret>")
    return match.group(1), hash_token(match.group(0))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def same_hash(stored: str, presented: str) -> bool:
    return hmac.compare_digest(stored, presented)


def parse_permissions(raw: str) -> frozenset[Permission]:
    """`read,write` as permissions; raises ValueError on an unknown one."""
    names = {name.strip() for name in raw.split(",") if name.strip()}
    unknown = names - set(PERMISSIONS)
    if unknown or not names:
        raise ValueError(f"permissions must be some of {', '.join(PERMISSIONS)}; "
                         f"got {raw!r}")
    return frozenset(p for p in PERMISSIONS if p in names)
