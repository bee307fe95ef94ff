-- memstream schema, version 11: API keys. Only the SHA-256 of a key's token is kept; the
-- token itself is shown once, when the key is made (processors/access.py).
CREATE TABLE api_keys (
    key_id      text PRIMARY KEY,
    token_hash  text        NOT NULL,
    -- NULL: every namespace (an operator's key).
    namespace   text,
    permissions text[]      NOT NULL,
    agent_id    text,
    label       text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_namespace ON api_keys (namespace, created_at);
