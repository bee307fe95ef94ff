"""Move a store to another embedding model: every record embedded again with it, then the
index rebuilt from Postgres.

    python -m streams.commands.reembed [--model NAME] [--batch 256]

NAME: a model of embedder/models.py, built by the set-up (default: MEMSTREAM_MODEL's). Stop
the workers first: while the store is moving, a worker of either model refuses to start
(stores/embedding_model.py), so no vector of the old model is written beside the new ones.
Records go in record id order, a page at a time, each page's vectors written together with
how far the move got: stopped at any point, the same command resumes after the last page
done. When every record holds the new model's vector, the store is marked as the new model's,
and the index is rebuilt from Postgres as `make reindex` rebuilds it
(stores.index.reindex.rebuild: every live record upserted, the rest pruned). Then start the
workers with MEMSTREAM_MODEL=NAME. Gap questions are grouped by the similarity model, which
does not change with it (processors/text/calibration.py).
docs/operating.md#changing-the-embedding-model.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict

from embedder.model import Embedder
from embedder.models import ModelSpec, model_dir, spec
from stores.embedding_model import (
    begin_reembedding,
    finish_reembedding,
    records_after,
    records_left,
    store_model,
    store_record_vectors,
)
from stores.index.reindex import ReindexReport, connect_with_vectors, rebuild
from streams.plumbing.config import Settings


async def reembed(settings: Settings, model: ModelSpec, batch: int) -> ReindexReport | None:
    """Move the store to `model` (or finish moving it); the rebuild's report, or None when
    the store already held `model`'s vectors and nothing was done."""
    connection = await connect_with_vectors(settings.pg_dsn)
    try:
        held = await store_model(connection)
        if held.model == model.name and held.reembedding_to is None:
            return None
        after = await begin_reembedding(connection, model.name)
        total = await records_left(connection, after)
        print(f"re-embedding {total} records into {model.name}"
              + (f", resuming after {after}" if after else ""), flush=True)
        done, started = 0, time.perf_counter()
        with Embedder.load(model_dir(model.name)) as embedder:
            while page := await records_after(connection, after, batch):
                vectors = await asyncio.to_thread(
                    embedder.embed, [text for _, text in page], role="passage")
                await store_record_vectors(connection, model.name, [
                    (record_id, vector)
                    for (record_id, _), vector in zip(page, vectors, strict=True)])
                after, done = page[-1][0], done + len(page)
                rate = done / max(time.perf_counter() - started, 1e-9)
                print(f"  {done} of {total} ({100 * done / max(total, 1):.0f}%), "
                      f"{rate:.0f} records/s", flush=True)
        await finish_reembedding(connection, model.name)
        print(f"re-embedded {done} records; rebuilding the index", flush=True)
    finally:
        await connection.close()
    return await rebuild(settings.pg_dsn, settings.index_url)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams.commands.reembed",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None,
                        help="the model to move to (default: MEMSTREAM_MODEL's)")
    parser.add_argument("--batch", type=int, default=256, help="records per page")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    try:
        model = settings.model if args.model is None else spec(args.model)
    except ValueError as exc:
        parser.error(str(exc))
    report = asyncio.run(reembed(settings, model, args.batch))
    if report is None:
        print(f"the store already holds {model.name}'s vectors: nothing to do")
    else:
        print(f"index rebuilt: {asdict(report)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
