"""The consolidator's lower priority holds across sessions: with autogroups, a process
that leads its own session (as honcho starts each Procfile process) lowers its autogroup,
and one that shares its session lowers only itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/autogroup").exists(),
                                reason="the kernel has no autogroups")

# A session still in the kernel's default autogroup (one that never called setsid, as a
# container's first session may be) reads an empty /proc/self/autogroup.
REPORT = (
    "import json, os; from streams.worker import lower_priority; lower_priority(7); "
    "print(json.dumps([os.nice(0), open('/proc/self/autogroup').read()]))"
)


def niceness_and_autogroup(new_session: bool) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True,
                          start_new_session=new_session)
    assert done.returncode == 0, done.stderr
    nice, autogroup = json.loads(done.stdout)
    return int(nice), str(autogroup)


def test_a_session_leader_lowers_its_autogroup() -> None:
    lowered = os.nice(0) + 7
    nice, autogroup = niceness_and_autogroup(new_session=True)
    assert nice == lowered
    assert autogroup.split()[-1] == str(lowered)


def test_a_process_sharing_its_session_leaves_the_autogroup_alone() -> None:
    nice, autogroup = niceness_and_autogroup(new_session=False)
    assert nice == os.nice(0) + 7
    assert autogroup == Path("/proc/self/autogroup").read_text()
