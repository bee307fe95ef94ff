"""The CLI's pure parts: tables cut to the terminal, its settings, the feed's cursors."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memstream_client.cli.commands import interrupts_deferred, parser
from memstream_client.cli.errors import failure_of
from memstream_client.cli.tables import cell, column_widths, table, truncate
from memstream_client.sdk.config import DEFAULT_URL, load_config
from memstream_client.sdk.errors import ConfigError
from processors.api.parameters import InvalidValue
from stores.record_versions import ChangePosition
from streams.api.memory.changes import cursor_position, encode_cursor


def test_truncate_marks_a_cut() -> None:
    assert truncate("abcdef", 6) == "abcdef"
    assert truncate("abcdef", 4) == "abc…"
    assert truncate("abcdef", 1) == "…"
    assert truncate("abcdef", 0) == ""


def test_cells_are_one_line() -> None:
    assert cell(None) == "-"
    assert cell(0.12345) == "0.123"
    assert cell(["a", "b"]) == "a, b"
    assert cell([]) == "-"
    assert cell("two\n  lines\tand tabs ") == "two lines and tabs"


def test_a_table_aligns_its_columns() -> None:
    assert table(["id", "text"], [("a", "first"), ("bbb", "second")], 80).splitlines() == [
        "id   text",
        "a    first",
        "bbb  second",
    ]


def test_a_table_cuts_its_text_column_to_the_width_and_never_its_ids() -> None:
    rows = [("mem_0123456789abcdef01234567", "x" * 200), ("mem_1", "short")]
    lines = table(["record", "text"], rows, 60).splitlines()
    assert all(len(line) <= 60 for line in lines)
    assert lines[1].startswith("mem_0123456789abcdef01234567  xxx")
    assert lines[1].endswith("…")
    assert lines[2] == "mem_1                         short"


def test_the_widest_flexible_column_is_cut_first() -> None:
    # 10 + 40 + 30 and two gaps of 2 is 84: 24 too many, none taken from the first; the
    # 10 down to the next widest, then the two in turn: [10, 23, 23].
    assert column_widths([10, 40, 30], 60, flexible=(1, 2)) == [10, 23, 23]
    # Then both, evenly, down to the minimum; ids stay whole even if the line overflows.
    assert column_widths([30, 40, 30], 20, flexible=(1, 2)) == [30, 8, 8]
    assert column_widths([5, 6], 100, flexible=(-1,)) == [5, 6]


def test_settings_come_from_flags_then_environment_then_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('url = "http://file:1/"\nkey = "msk_file"\nnamespace = "from-file"\n')
    env = {"MEMSTREAM_CONFIG": str(config)}
    assert (load_config(env).url, load_config(env).key, load_config(env).namespace) == (
        "http://file:1", "msk_file", "from-file")
    env |= {"MEMSTREAM_URL": "http://env:2", "MEMSTREAM_API_KEY": "msk_env"}
    found = load_config(env, namespace="flag")
    assert (found.url, found.key, found.namespace) == ("http://env:2", "msk_env", "flag")
    assert load_config(env, url="http://flag:3").url == "http://flag:3"


def test_the_default_file_is_under_home_and_may_be_missing(tmp_path: Path) -> None:
    assert load_config({"HOME": str(tmp_path)}).url == DEFAULT_URL
    (tmp_path / ".config" / "memstream").mkdir(parents=True)
    (tmp_path / ".config" / "memstream" / "config.toml").write_text('namespace = "team-a"\n')
    assert load_config({"HOME": str(tmp_path)}).namespace == "team-a"


@pytest.mark.parametrize("content", ['url = [1]\n', 'url = "unclosed\n'])
def test_a_broken_or_missing_named_file_is_a_usage_error(tmp_path: Path, content: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(content)
    for env in ({"MEMSTREAM_CONFIG": str(config)},
                {"MEMSTREAM_CONFIG": str(tmp_path / "missing.toml")}):
        with pytest.raises(ConfigError) as refused:
            load_config(env)
        assert failure_of(refused.value, key_given=False).exit_code == 2


def test_flags_may_come_before_or_after_the_command() -> None:
    before = parser().parse_args(["--json", "-n", "a", "search", "q"])
    after = parser().parse_args(["search", "q", "-n", "b", "--json"])
    assert (before.json, before.namespace, after.json, after.namespace) == (
        True, "a", True, "b")
    assert parser().parse_args(["-n", "a", "search", "q", "-n", "b"]).namespace == "b"
    listing = parser().parse_args(["review"])
    decided = parser().parse_args(["review", "approve", "d1", "--note", "ok"])
    assert (listing.decision, decided.decision, decided.target, decided.note) == (
        None, "approve", "d1", "ok")


def test_a_cursor_stands_for_its_position_to_the_microsecond() -> None:
    position = ChangePosition(datetime(2026, 11, 21, 10, 0, 0, 123456,
                                       tzinfo=timezone(timedelta(hours=1))), "mem_a|b", 7)
    assert cursor_position(encode_cursor(position)) == position
    assert cursor_position("") is None
    later = ChangePosition(datetime(2026, 11, 21, 10, 0, 1, tzinfo=UTC), "mem_a", 1)
    assert encode_cursor(later) != encode_cursor(position)


@pytest.mark.parametrize("cursor", ["***", "bm90IGEgY3Vyc29y", "é", *(encode_cursor(position)
    for position in (ChangePosition(datetime(2026, 1, 1), "mem_a", 1),
                     ChangePosition(datetime(2026, 1, 1, tzinfo=UTC), "mem_\x00", 1),
                     ChangePosition(datetime(2026, 1, 1, tzinfo=UTC), "mem_a", 2**31),
                     ChangePosition(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
                                    "mem_a", 1)))])
def test_a_cursor_the_feed_did_not_give_is_refused(cursor: str) -> None:
    # A record id, version or time the feed cannot have given would reach Postgres.
    with pytest.raises(InvalidValue, match="not a cursor this feed gave"):
        cursor_position(cursor)


def test_a_ctrl_c_inside_a_deferred_block_is_raised_when_the_block_is_whole() -> None:
    # As an interactive shell starts a command (a background job ignores Ctrl-C).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        finished = []
        with pytest.raises(KeyboardInterrupt), interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            finished.append(True)
        assert finished == [True]
        # Outside the block, Ctrl-C is Python's again.
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
