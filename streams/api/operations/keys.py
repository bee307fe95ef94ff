"""The API keys over HTTP, for admins: list, make (the token is in this answer only) and
revoke. A namespace's admin manages that namespace's keys; only an operator's key (every
namespace) makes or sees keys of every namespace."""

from __future__ import annotations

from typing import Any

from faust.web import Request, Response, View

from memstream_client.answers.operations import ApiKey, KeyList, MadeKey
from processors.api.access import PERMISSIONS, Caller, Forbidden, parse_permissions
from processors.api.openapi import Body
from processors.api.parameters import IDENTIFIER, NAMESPACE, api_key_id, text
from processors.events.intake import json_object
from stores.api_keys import ApiKeys, KeyGrant, StoredKey
from streams.api.pages import Pages
from streams.api.params import NAMESPACE_PARAMS, BadQuery, Param, Params, optional, parsed

# A key's grant is a few short fields.
MAX_BODY_BYTES = 4096
LABEL = text(200)
# What `grant_of` reads, by the rules it reads it with.
GRANT_BODY = Body("KeyGrant", {
    "type": "object", "required": ["permissions"], "properties": {
        "namespace": {"anyOf": [NAMESPACE.schema, {"type": "null"}],
                      "description": "The namespace the key is for; none: every namespace "
                                     "(an operator's key)"},
        "permissions": {"anyOf": [
            {"type": "array", "items": {"enum": list(PERMISSIONS)}},
            {"type": "string", "description": "comma-separated"}]},
        "agent_id": {"anyOf": [IDENTIFIER.schema, {"type": "null"}],
                     "description": "The agent the key is bound to"},
        "label": LABEL.schema}}, status=201)
KEY_PARAMS: Params = {"key_id": Param(api_key_id)}


def wire_keys(pages: Pages, keys: ApiKeys) -> None:
    @pages.page("/v1/keys", params=NAMESPACE_PARAMS, methods=("GET", "POST"),
                answer={"GET": KeyList, "POST": MadeKey}, body=GRANT_BODY)
    async def keys_view(web: View, request: Request, caller: Caller) -> KeyList | MadeKey:
        """List the keys (never their tokens), or make one (201: its token, shown once)."""
        if request.method == "POST":
            grant = grant_of(json_object(await request.read(), MAX_BODY_BYTES))
            admin_over(caller, grant.namespace)
            made = await keys.make_key(grant)
            return made_key(made.key, made.token)
        namespace = optional(request.query, "namespace", NAMESPACE)
        admin_over(caller, namespace)
        return KeyList(keys=[key_answer(key) for key in await keys.keys(namespace)])

    @pages.page("/v1/keys/{key_id}", params=KEY_PARAMS, methods=("GET", "DELETE"),
                answer=ApiKey)
    async def key_view(web: View, request: Request, caller: Caller,
                       key_id: str) -> ApiKey | Response:
        """A key (never its token), or revoke it (the key as revoked)."""
        found = await keys.key(key_id)
        # A key of another namespace is answered as no key: its id tells nothing.
        if found is None or not caller.may("admin", found.caller.namespace):
            return web.json({"error": f"no key {key_id!r}"}, status=404)
        if request.method == "DELETE":
            found = await keys.revoke(key_id) or found
        return key_answer(found)


def admin_over(caller: Caller, namespace: str | None) -> None:
    if not caller.may("admin", namespace):
        raise Forbidden(f"key {caller.key_id} may not manage the keys of "
                        + ("every namespace" if namespace is None else repr(namespace)))


def grant_of(body: dict[str, Any]) -> KeyGrant:
    namespace, agent_id, label = (body.get("namespace"), body.get("agent_id"),
                                  body.get("label", ""))
    permissions = body.get("permissions")
    if isinstance(permissions, list) and all(isinstance(p, str) for p in permissions):
        permissions = ",".join(permissions)
    if not all(isinstance(v, str | None) for v in (namespace, agent_id)) or \
            not isinstance(label, str) or not isinstance(permissions, str):
        raise BadQuery("expected {namespace: string or null, permissions: [read, write, "
                       "review, admin], agent_id?: string, label?: string}")
    try:
        granted = parse_permissions(permissions)
    except ValueError as exc:
        raise BadQuery(str(exc)) from None
    # The same rules as the namespace and agent of an event, and of a read.
    return KeyGrant(parsed("namespace", NAMESPACE, namespace) if namespace else None, granted,
                    parsed("agent_id", IDENTIFIER, agent_id) if agent_id else None,
                    parsed("label", LABEL, label))

def key_answer(key: StoredKey) -> ApiKey:
    """A key as listed: its grants, never its token or hash."""
    caller = key.caller
    return ApiKey(key_id=key.key_id, namespace=caller.namespace,
                  permissions=sorted(caller.permissions), agent_id=caller.agent_id,
                  label=key.label, created_at=key.created_at, revoked_at=key.revoked_at)


def made_key(key: StoredKey, token: str) -> MadeKey:
    """A key just made, with its token: the one answer that shows it."""
    caller = key.caller
    return MadeKey(key_id=key.key_id, namespace=caller.namespace,
                   permissions=sorted(caller.permissions), agent_id=caller.agent_id,
                   label=key.label, created_at=key.created_at, revoked_at=key.revoked_at,
                   token=token)
