import pytest

from memstream_client.redaction import redact_secrets


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ("use sk-proj-abcdefghijklmnopqrstuvwx123 for the API", "sk-proj-abc", "openai_key"),
        ("key AKIAIOSFODNN7EXAMPLE in the env", "AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abc", "github_token"),
        ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890", "slack_token"),
        ("Authorization: Bearer abcdefghijklmnop1234", "abcdefghijklmnop1234", "bearer_token"),
        ("postgres://bob:hunter2@db:5432/app", "hunter2", "url_password"),
        ('password: "s3cr3tpass"', "s3cr3tpass", "assigned_secret"),
        ("DB_PASSWORD=abc123xyz", "abc123xyz", "assigned_secret"),
        ("client_secret = 'zzTopSecret99'", "zzTopSecret99", "assigned_secret"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
            "eyJhbGciOiJIUzI1NiJ9",
            "jwt",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "MIIEpAIBAAKCAQEA",
            "private_key",
        ),
    ],
)
def test_secrets_are_replaced_by_a_marker_naming_their_kind(
    text: str, secret: str, kind: str
) -> None:
    redacted = redact_secrets(text)
    assert secret not in redacted.text
    assert f"[REDACTED:{kind}]" in redacted.text
    assert redacted.found[kind] == 1


def test_ordinary_text_is_untouched() -> None:
    text = "The password policy requires 12 characters; see the secrets page for rotation."
    redacted = redact_secrets(text)
    assert redacted.text == text
    assert not redacted.found


def test_url_user_and_host_survive() -> None:
    assert redact_secrets("https://ann:pw1234@example.org/x").text == (
        "https://ann:[REDACTED:url_password]@example.org/x"
    )


def test_redaction_is_idempotent() -> None:
    once = redact_secrets("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx123").text
    twice = redact_secrets(once)
    assert twice.text == once
    assert not twice.found
