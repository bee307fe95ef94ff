"""The refusal rules: conservative on facts however short, and a reason for each refusal."""

from __future__ import annotations

import pytest

from bench.refusal_eval import judged, load, locomo_check, score
from memstream_client.redaction import redact_secrets
from processors.memory.refusal import refusal_of
from streams.plumbing.config import Settings

KEPT = [
    "VPN required.", "Port 5432.", "Use Python 3.11", "Ana owns billing.", "Never force-push main.",
    "settings.batch_max", "HTTP 429", "S3", "42", "Kubernetes", "Deprecated.",
    "Ana said yes", "Bo agreed", "See you Monday", "Thanks PostgreSQL",
    "OK, the deploy is green.", "Thanks Bo for fixing the cache!", "Hi Ana, the build is broken.",
    "lol the fix was a missing comma in config.yaml", "Does staging need the VPN?",
    "Le déploiement nécessite le VPN.", "部署需要VPN。", "🚀 Deployed v2.4 to prod.",
    "Ana: It's Frida Kahlo!", "Mia: Thanks! I painted it for my mum.",
    "The staging DB is at postgres://app:[REDACTED:url_password]@db.staging:5432/app.",
    "Set DB_PASSWORD=[REDACTED:assigned_secret] in .env.local, never in the repo.",
]

REFUSED = [
    ("t", "too_short"), ("?", "too_short"), ("👍", "too_short"), (";)", "too_short"),
    ("是", "too_short"), ("Ana: ;)", "too_short"),
    ("It is what it is.", "no_content_words"), ("and then?", "no_content_words"),
    ("ok", "filler"), ("thanks!", "filler"), ("hi there", "filler"), ("lol", "filler"),
    ("sounds good", "filler"), ("hahahaha", "filler"), ("Thanks, Ana!", "filler"),
    ("Thank you, Ana Lima!", "filler"), ("Ana, thanks!", "filler"), ("Bo: Bye!", "filler"),
    ("Hey Mia, how are you?", "filler"), ("Merci beaucoup !", "filler"), ("谢谢", "filler"),
    ("lol 😂😂", "filler"), ("it\u2019s fine", "filler"),
    ("[REDACTED:openai_key]", "only_a_secret"),
    ("password=[REDACTED:assigned_secret]", "only_a_secret"),
    ("Here's my token: [REDACTED:github_token] thanks", "only_a_secret"),
]


@pytest.mark.parametrize("text", KEPT)
def test_a_text_that_may_carry_a_fact_is_kept(text: str) -> None:
    assert refusal_of(text, None) is None


@pytest.mark.parametrize(("text", "reason"), REFUSED)
def test_a_text_with_nothing_to_retain_is_refused_with_its_reason(text: str,
                                                                  reason: str) -> None:
    assert refusal_of(text, None) == reason


def test_a_title_with_content_keeps_the_write() -> None:
    assert refusal_of("ok", None) == "filler"
    assert refusal_of("ok", "Staging VPN") is None
    assert refusal_of("[REDACTED:openai_key]", "OpenAI key of the nightly eval") is None


def test_secrets_are_judged_once_redacted() -> None:
    raw = "api_key: " + "s" * 24
    assert refusal_of(raw, None) is None, "unredacted, the value reads as a word"
    assert judged(raw) == refusal_of(redact_secrets(raw).text, None) == "only_a_secret"


def test_the_labelled_set_is_refused_with_high_precision() -> None:
    cases = load()
    assert len(cases) >= 250
    assert {case.refuse for case in cases} == {True, False}
    result = score(cases, [judged(case.text) for case in cases])
    assert result.precision >= 0.99, result
    assert result.recall >= 0.90, result


def test_no_locomo_evidence_turn_is_refused() -> None:
    check = locomo_check()
    assert check.evidence_turns > 300
    assert check.evidence_refused == []
    assert len(check.refused) < check.turns // 50


def test_refusing_is_on_by_default_and_can_be_turned_off() -> None:
    assert Settings.from_env({"MEMSTREAM_PG_DSN": "x"}).refuse_low_value is True
    assert Settings.from_env({"MEMSTREAM_PG_DSN": "x",
                              "MEMSTREAM_REFUSE_LOW_VALUE": "false"}).refuse_low_value is False
