"""The settings of the environment: each read by its rule, and a value a setting does not take
refused at start with the variable's name and what it takes (a typo is no silent "on")."""

from __future__ import annotations

import pytest

from streams.plumbing.config import MemoryFlags, SettingError, Settings

BASE = {"MEMSTREAM_PG_DSN": "postgresql:///x", "MEMSTREAM_KAFKA_BOOTSTRAP": "k:9092"}


@pytest.mark.parametrize(("name", "raw", "on"), [
    ("MEMORY_HISTORY", "off", False), ("MEMORY_HISTORY", "digest", True),
    ("MEMORY_HISTORY", "ON", True), ("MEMORY_LONG_TERM", "mem0", True),
    ("MEMORY_LONG_TERM", "false", False), ("MEMORY_DOCUMENTS", "no", False),
    ("MEMORY_DOCUMENTS", "yes", True), ("MEMORY_DOCUMENTS", "", True),
])
def test_a_switch_takes_on_off_and_the_seeds_names(name: str, raw: str, on: bool) -> None:
    flags = MemoryFlags.from_env({name: raw})
    assert {"MEMORY_HISTORY": flags.history, "MEMORY_LONG_TERM": flags.long_term,
            "MEMORY_DOCUMENTS": flags.documents}[name] is on


@pytest.mark.parametrize(("name", "raw", "takes"), [
    ("MEMORY_HISTORY", "of", "off or digest"),
    ("MEMORY_LONG_TERM", "mem-0", "off or mem0"),
    ("MEMORY_DOCUMENTS", "disabled", "off (or on/off, true/false)"),
    ("MEMORY_ENABLED", "ture", "true or false"),
    ("MEMORY_PLANNING", "jira", "off or beads"),
    ("MEMORY_CONTEXT_BUDGET_TOKENS", "2k", "an integer from 0"),
    ("MEMORY_CONTEXT_SHARES", "history=2", "MEMORY_CONTEXT_SHARES: "),
])
def test_a_memory_flag_refuses_what_it_does_not_take(name: str, raw: str, takes: str) -> None:
    with pytest.raises(SettingError, match=name) as refused:
        MemoryFlags.from_env({name: raw})
    assert (takes in str(refused.value) and repr(raw) in str(refused.value)) \
        or takes in str(refused.value)


@pytest.mark.parametrize(("name", "raw", "takes"), [
    ("MEMSTREAM_INVALIDATION", "of", "off (or on/off, true/false)"),
    ("MEMSTREAM_AUTH", "disable", "off (or on/off, true/false)"),
    ("MEMSTREAM_REFUSE_LOW_VALUE", "maybe", "true or false"),
    ("MEMSTREAM_WEB_PORT", "70000", "an integer from 1 to 65535"),
    ("MEMSTREAM_BATCH_MAX", "0", "an integer from 1"),
    ("MEMSTREAM_BATCH_MAX", "many", "an integer from 1"),
    ("MEMSTREAM_SESSION_TIMEOUT_S", "-3", "a number of at least 0"),
    ("MEMSTREAM_TWIN_COSINE", "high", "off or a number of at least 0 and at most 1.0"),
    ("MEMSTREAM_TWIN_COSINE", "1.5", "off or a number of at least 0 and at most 1.0"),
    ("MEMSTREAM_PLANNING_SYNC_S", "hourly", "off or a number of at least 0"),
    ("MEMSTREAM_DERIVED_REVIEW", "auto", "draft or approved"),
    ("MEMSTREAM_PROTECT", "everything", "takes none or approved"),
    ("MEMSTREAM_RETENTION", "memory=forever", "MEMSTREAM_RETENTION: "),
    ("MEMSTREAM_KAFKA_SECURITY_PROTOCOL", "TLS", "MEMSTREAM_KAFKA_SECURITY_PROTOCOL"),
    ("MEMSTREAM_MODEL", "bge-small", "known: all-MiniLM-L6-v2, e5-small-v2"),
])
def test_a_setting_refuses_what_it_does_not_take_naming_the_variable(
        name: str, raw: str, takes: str) -> None:
    with pytest.raises(SettingError, match=name) as refused:
        Settings.from_env({**BASE, name: raw})
    assert takes in str(refused.value)


def test_settings_are_read_by_their_rules_and_empty_means_the_default() -> None:
    settings = Settings.from_env({**BASE, "MEMSTREAM_TWIN_COSINE": "OFF",
                                  "MEMSTREAM_PLANNING_SYNC_S": "30",
                                  "MEMSTREAM_BATCH_MAX": " 64 ", "MEMSTREAM_AUTH": "off",
                                  "MEMSTREAM_WEB_PORT": "", "MEMORY_HISTORY": "digest"})
    assert (settings.twin_cosine, settings.planning_sync_s) == (None, 30.0)
    assert (settings.batch_max, settings.auth, settings.web_port) == (64, False, 6066)
    assert settings.memory.history is True
    assert settings.model.name == "e5-small-v2"
    minilm = Settings.from_env({**BASE, "MEMSTREAM_MODEL": "all-minilm-l6-v2"})
    assert minilm.model_dir.name == minilm.model.name == "all-MiniLM-L6-v2"
