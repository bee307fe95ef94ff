"""The worker, with failures injected while files exist: for tests of what the worker does
when a part of it breaks, which real components cannot be made to do on cue.

    MEMSTREAM_FAULTS_DIR=/tmp/faults python -m tests.integration.faulty_worker [--role ...]

- `<dir>/crash-memory-writes`: the memory writer's completing stage raises (a bug in it).
- `<dir>/index-down`: every index upsert fails as an unreachable server does.

Everything else is the real worker.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from stores.index.factory import open_index
from streams import worker
from streams.stages.memory.intake import MemoryWriter, PreparedWrites

FAULTS = Path(os.environ["MEMSTREAM_FAULTS_DIR"])


def inject() -> None:
    complete = MemoryWriter.complete

    async def crashing_complete(self: MemoryWriter, prepared: PreparedWrites) -> None:
        if (FAULTS / "crash-memory-writes").exists():
            raise RuntimeError("injected: the memory writer's stage is broken")
        await complete(self, prepared)

    MemoryWriter.complete = crashing_complete  # type: ignore[method-assign]

    def open_failing_index(url: str, **kwargs: Any) -> Any:
        index = open_index(url, **kwargs)
        upsert = index.upsert

        async def failing_upsert(points: Any) -> None:
            if (FAULTS / "index-down").exists():
                raise ConnectionRefusedError(111, "injected: the index is unreachable")
            await upsert(points)

        index.upsert = failing_upsert  # type: ignore[method-assign]
        return index

    worker.open_index = open_failing_index  # type: ignore[assignment]


if __name__ == "__main__":
    inject()
    worker.main(sys.argv[1:])
