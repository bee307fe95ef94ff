"""The planning of the repositories memstream knows (MEMSTREAM_PLANNING_REPOS: a name → a
checkout): each checkout's `.beads/issues.jsonl`, read and written whole, the write atomic (a
temporary file beside it, then a rename), so that bd, git or a reader never sees half of it.

When `bd` is on the PATH, the JSONL is only bd's export of its own store: bd is asked to
export it (`bd export`) before a read, and to import it (`bd import`) after a write, so that
what memstream writes reaches bd's store. Without bd, the JSONL is the state itself.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from processors.planning.beads import BeadsFile, BeadsFormatError, parse, serialize

ISSUES = Path(".beads") / "issues.jsonl"
BD_TIMEOUT_S = 30.0


class PlanningUnavailable(Exception):
    """The repository's planning cannot be read or written: unknown repo, no file, a corrupt
    line, bd failing. Never raised into a run or a pack: counted and named `degraded`."""

    retriable = True

    def __init__(self, repo: str, detail: str) -> None:
        super().__init__(f"planning of {repo!r}: {detail}")
        self.repo = repo
        self.detail = detail


class UnknownRepo(PlanningUnavailable):
    """No checkout is configured for the repo: asking again will not help."""

    retriable = False


class BeadsRepos:
    def __init__(self, checkouts: Mapping[str, Path], bd: str | None = None) -> None:
        self._checkouts = dict(checkouts)
        # bd's path when it is installed (the worker looks for it on the PATH).
        self._bd = bd

    @property
    def repos(self) -> list[str]:
        return sorted(self._checkouts)

    def path(self, repo: str) -> Path:
        if repo not in self._checkouts:
            raise UnknownRepo(repo, "no checkout is configured for it "
                                    "(MEMSTREAM_PLANNING_REPOS)")
        return self._checkouts[repo] / ISSUES

    async def read(self, repo: str) -> BeadsFile:
        path = self.path(repo)
        if self._bd:
            await _run_bd(self._bd, repo, self._checkouts[repo], "export", "-o", str(ISSUES))
        try:
            text = await asyncio.to_thread(path.read_text, encoding="utf-8")
        except FileNotFoundError:
            raise PlanningUnavailable(repo, f"{path} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise PlanningUnavailable(repo, f"{path} cannot be read: {exc}") from None
        try:
            return parse(text)
        except BeadsFormatError as exc:
            raise PlanningUnavailable(repo, f"{path} is corrupt: {exc}") from None

    async def write(self, repo: str, beads: BeadsFile) -> None:
        path = self.path(repo)
        try:
            await asyncio.to_thread(_replace, path, serialize(beads))
        except OSError as exc:
            raise PlanningUnavailable(repo, f"{path} cannot be written: {exc}") from None
        if self._bd:
            await _run_bd(self._bd, repo, self._checkouts[repo], "import", "-i", str(ISSUES))


async def _run_bd(bd: str, repo: str, checkout: Path, *args: str) -> None:
    try:
        process = await asyncio.create_subprocess_exec(
            bd, *args, "--json", cwd=checkout,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, stderr = await asyncio.wait_for(process.communicate(), BD_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise PlanningUnavailable(repo, f"bd {args[0]} failed: {exc!r}") from None
    if process.returncode != 0:
        raise PlanningUnavailable(repo, f"bd {args[0]} exited {process.returncode}: "
                                        f"{stderr.decode(errors='replace')[:500]}")


def _replace(path: Path, text: str) -> None:
    # The temporary file in the same folder, so that the rename stays on one file system.
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".issues.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
