"""The grants of API keys (processors/api/access.py) and the authenticator over a key store
(streams/api/auth.py), in memory."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from processors.api.access import (
    PERMISSIONS,
    Caller,
    Forbidden,
    KeysUnavailable,
    Permission,
    Unauthenticated,
    hash_token,
    parse_permissions,
    parse_token,
    token_of,
)
from stores.api_keys import KeyGrant, MadeKey, StoredKey
from streams.api import auth
from streams.api.auth import Authenticator

AGENTS = st.sampled_from(["ann", "bob", "cy"])
NAMESPACES = st.sampled_from(["team-a", "team-b"])
callers = st.builds(
    Caller, key_id=st.just("0123456789ab"), namespace=st.none() | NAMESPACES,
    permissions=st.frozensets(st.sampled_from(PERMISSIONS), min_size=1),
    agent_id=st.none() | AGENTS)


@given(callers, st.sampled_from(["shared", "personal"]), st.none() | AGENTS)
def test_a_personal_record_is_seen_by_its_agent_or_an_unbound_admin_only(
        caller: Caller, scope: str, owner: str | None) -> None:
    seen = caller.sees(scope, owner)
    if scope == "shared":
        assert seen
    elif caller.agent_id is not None:
        assert seen == (owner == caller.agent_id)
    else:
        assert seen == ("admin" in caller.permissions)


@given(callers, st.none() | AGENTS)
def test_a_bound_key_reads_its_own_agent_whatever_the_request_names(
        caller: Caller, requested: str | None) -> None:
    if caller.agent_id is not None:
        if requested in (None, caller.agent_id):
            assert caller.reader_of(requested) == caller.agent_id
        else:
            with pytest.raises(Forbidden):
                caller.reader_of(requested)
    elif requested is not None and "admin" not in caller.permissions:
        with pytest.raises(Forbidden):
            caller.reader_of(requested)
    else:
        assert caller.reader_of(requested) == requested


@given(callers, st.sampled_from(PERMISSIONS), NAMESPACES)
def test_a_key_acts_within_its_namespace_and_admin_implies_every_permission(
        caller: Caller, permission: Permission, namespace: str) -> None:
    allowed = caller.namespace in (None, namespace) and (
        permission in caller.permissions or "admin" in caller.permissions)
    assert caller.may(permission, namespace) == allowed
    if not allowed:
        with pytest.raises(Forbidden):
            caller.check(permission, namespace)


def test_only_an_operators_key_acts_on_every_namespace() -> None:
    operator = Caller("k", None, frozenset({"admin"}), None)
    team = Caller("k", "team-a", frozenset({"admin"}), None)
    assert operator.may("admin", None) and not team.may("admin", None)


def test_a_bound_key_writes_as_its_agent() -> None:
    bound = Caller("k", "team-a", frozenset({"write"}), "ann")
    assert bound.writer_for(None) == "ann" and bound.writer_for("ann") == "ann"
    with pytest.raises(Forbidden):
        bound.writer_for("bob")
    assert replace(bound, agent_id=None).writer_for("bob") == "bob"


@pytest.mark.parametrize("header", [None, "", "Basic abc", "Bearer", "Bearer msk_nothex_x",
                                    "Bearer " + token_of("0123456789ab", "short")])
def test_a_header_without_a_well_formed_key_is_unauthenticated(header: str | None) -> None:
    with pytest.raises(Unauthenticated):
        parse_token(header)


def test_a_token_is_known_by_its_id_and_hash() -> None:
    token = token_of("0123456789ab", "s" * 43)
    assert parse_token(f"Bearer {token}") == ("0123456789ab", hash_token(token))
    assert parse_token(f"bearer  {token} ") == ("0123456789ab", hash_token(token))


def test_permissions_are_checked() -> None:
    assert parse_permissions("read, write") == frozenset({"read", "write"})
    for bad in ("", "read,own", "root"):
        with pytest.raises(ValueError):
            parse_permissions(bad)


class InMemoryKeys:
    def __init__(self) -> None:
        self.stored: dict[str, StoredKey] = {}
        self.down = False

    async def make_key(self, grant: KeyGrant) -> MadeKey:
        key_id = f"{len(self.stored):012x}"
        token = token_of(key_id, "x" * 43)
        stored = StoredKey(key_id, hash_token(token), Caller(
            key_id, grant.namespace, grant.permissions, grant.agent_id), grant.label,
            datetime.now(UTC), None)
        self.stored[key_id] = stored
        return MadeKey(token, stored)

    async def key(self, key_id: str) -> StoredKey | None:
        if self.down:
            raise ConnectionRefusedError("postgres is down")
        return self.stored.get(key_id)

    async def keys(self, namespace: str | None) -> list[StoredKey]:
        return list(self.stored.values())

    async def revoke(self, key_id: str) -> StoredKey | None:
        self.stored[key_id] = replace(self.stored[key_id], revoked_at=datetime.now(UTC))
        return self.stored[key_id]

    async def any_key(self) -> bool:
        return bool(self.stored)


def test_a_revoked_key_stops_at_once_and_a_forged_secret_never_works() -> None:
    async def scenario() -> None:
        keys = InMemoryKeys()
        authenticator = Authenticator(keys, enabled=True)
        made = await keys.make_key(KeyGrant("team-a", frozenset({"read"})))
        assert (await authenticator.caller(f"Bearer {made.token}")).namespace == "team-a"
        forged = token_of(made.key.key_id, "y" * 43)
        with pytest.raises(Unauthenticated) as unknown:
            await authenticator.caller(f"Bearer {forged}")
        assert unknown.value.failure == "unknown"
        await keys.revoke(made.key.key_id)
        with pytest.raises(Unauthenticated) as revoked:
            await authenticator.caller(f"Bearer {made.token}")
        assert revoked.value.failure == "revoked"

    asyncio.run(scenario())


def test_while_the_store_is_down_only_a_key_verified_lately_is_let_in(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        keys = InMemoryKeys()
        authenticator = Authenticator(keys, enabled=True)
        seen = await keys.make_key(KeyGrant("team-a", frozenset({"read"})))
        unseen = await keys.make_key(KeyGrant("team-a", frozenset({"read"})))
        await authenticator.caller(f"Bearer {seen.token}")
        keys.down = True
        assert (await authenticator.caller(f"Bearer {seen.token}")).key_id == seen.key.key_id
        with pytest.raises(KeysUnavailable):
            await authenticator.caller(f"Bearer {unseen.token}")
        with pytest.raises(KeysUnavailable):
            await authenticator.caller(f"Bearer {token_of(seen.key.key_id, 'y' * 43)}")
        monkeypatch.setattr(auth, "LAST_KNOWN_S", 0.0)
        with pytest.raises(KeysUnavailable):
            await authenticator.caller(f"Bearer {seen.token}")

    asyncio.run(scenario())


def test_with_authentication_off_every_request_may_do_everything(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        authenticator = Authenticator(InMemoryKeys(), enabled=False)
    assert "MEMSTREAM_AUTH=off" in caplog.text
    caller = asyncio.run(authenticator.caller(None))
    assert caller.may("admin", None) and caller.sees("personal", "anyone")
