"""The consolidator's lower priority holds across sessions: with autogroups, a process
that leads its own session (as honcho starts each Procfile process) lowers its autogroup,
and one that shares its session lowers only itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/autogroup").exists(),
                                reason="the kernel has no autogroups")

REPORT = (
    "import os; from streams.worker import lower_priority; lower_priority(7); "
    "print(os.nice(0)); print(open('/proc/self/autogroup').read().split()[-1])"
)


def niceness_and_autogroup(new_session: bool) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True,
                          check=True, start_new_session=new_session)
    nice, autogroup = done.stdout.split()
    return int(nice), int(autogroup)


def test_a_session_leader_lowers_its_autogroup() -> None:
    lowered = os.nice(0) + 7
    assert niceness_and_autogroup(new_session=True) == (lowered, lowered)


def test_a_process_sharing_its_session_leaves_the_autogroup_alone() -> None:
    nice, autogroup = niceness_and_autogroup(new_session=False)
    assert nice == os.nice(0) + 7
    assert autogroup == int(Path("/proc/self/autogroup").read_text().split()[-1])
