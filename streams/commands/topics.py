"""Create memstream's Kafka topics (infra/kafka/topics.json) where they are missing.

    python -m streams.commands.topics [--bootstrap host:port] [--file path]

creates the missing topics and prints what it did. The bootstrap address defaults to
``MEMSTREAM_KAFKA_BOOTSTRAP``, else the address the local broker wrote to
``var/kafka/bootstrap`` (``$KAFKA_DATA_DIR/bootstrap`` when that is set); the connection's
security (SASL, TLS) from ``MEMSTREAM_KAFKA_SECURITY_PROTOCOL`` and its companions
(docs/operating.md, "Kafka security").
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from publisher.kafka_security import KafkaSecurity
from streams.plumbing.topics import (
    BOOTSTRAP_ENV,
    default_bootstrap,
    ensure_topics,
    load_topic_specs,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streams.commands.topics",
        description="Create memstream's Kafka topics (infra/kafka/topics.json) if missing.",
    )
    parser.add_argument(
        "--bootstrap", help=f"host:port (default: ${BOOTSTRAP_ENV} or var/kafka/bootstrap)"
    )
    parser.add_argument("--file", type=Path, default=None, help="topics file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        bootstrap = args.bootstrap or default_bootstrap()
        specs = load_topic_specs(args.file)
        created = asyncio.run(ensure_topics(bootstrap, specs, KafkaSecurity.from_env(os.environ)))
    except Exception as exc:  # a CLI: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for spec in specs:
        state = "created" if spec.name in created else "exists"
        print(f"{state:8} {spec.name} partitions={spec.partitions} replication={spec.replication}")
    print(f"{len(created)} created, {len(specs) - len(created)} already existed ({bootstrap})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
