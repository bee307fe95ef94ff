"""Consolidate a namespace from the command line, or see what it would do.

    python -m streams.commands.consolidate --namespace X --dry-run  # print what would merge
    python -m streams.commands.consolidate --namespace X            # ask, print the report
    python -m streams.commands.consolidate --namespace X --reports  # the namespace's reports

A dry run reads Postgres and plans with the workers' code, and changes nothing (a record
without a usable vector is embedded in memory only). A real run goes the way every write
goes: a manual request on `memory.consolidate`, which the trigger rules do not stop, and the
command waits for its report. `--json` prints JSON instead of text. Configuration as for the
worker (streams/plumbing/config.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from embedder.model import Embedder
from embedder.models import SIMILARITY_MODEL, model_dir
from processors.consolidation.candidates import ConsolidationSettings
from publisher.kafka_publisher import Publisher
from stores.consolidations import MaintenanceReport
from stores.postgres.stores import PostgresStores
from streams.plumbing.config import Settings
from streams.plumbing.json_values import jsonable
from streams.plumbing.runtime import embed_with
from streams.stages.consolidation.consolidator import PlannedConsolidation, plan_namespace

PRODUCER = "memstream.consolidate-command"


async def dry_run(settings: Settings, namespace: str) -> dict[str, Any]:
    """What a consolidation of `namespace` would merge now."""
    stores = await PostgresStores.connect(settings.pg_dsn)
    try:
        # A dry run stores nothing, not even the similarity vectors a consolidation keeps.
        with Embedder.load(settings.model_dir) as embedder, \
                Embedder.load(model_dir(SIMILARITY_MODEL)) as judge:
            planned = await plan_namespace(
                stores.consolidations, partial(embed_with, embedder, None, role="passage"),
                partial(embed_with, judge, None, role="passage"), namespace,
                ConsolidationSettings(), embedder.dimension)
    finally:
        await stores.close()
    return plan_summary(namespace, planned)


def plan_summary(namespace: str, planned: PlannedConsolidation) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "dry_run": True,
        "memories": planned.plan.memories,
        "re_embedded": planned.re_embedded,
        "merges": [
            {"new_id": merge.record_id, "medoid_id": merge.medoid_id,
             "members": [{"record_id": member, "text": planned.records[member].text}
                         for member in merge.member_ids],
             "text": merge.text}
            for merge in planned.plan.merges
        ],
        "interrupted": planned.plan.interrupted,
        "timings": planned.timings,
    }


async def request_and_wait(settings: Settings, namespace: str,
                           timeout_s: float) -> MaintenanceReport:
    """Publish a manual request and return its report once the workers announced it."""
    async with Publisher(settings.kafka_bootstrap, producer=PRODUCER,
                         security=settings.kafka_security) as publisher:
        request_id = await publisher.request_consolidation(namespace)
    stores = await PostgresStores.connect(settings.pg_dsn)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            report = await stores.consolidations.report(request_id)
            if report is not None and report.announced_at is not None:
                return report
            if time.monotonic() > deadline:
                raise TimeoutError(f"no report for request {request_id} after {timeout_s:.0f}s;"
                                   " is a worker running?")
            await asyncio.sleep(0.25)
    finally:
        await stores.close()


async def list_reports(settings: Settings, namespace: str,
                       limit: int) -> list[MaintenanceReport]:
    stores = await PostgresStores.connect(settings.pg_dsn)
    try:
        return await stores.consolidations.reports(namespace, limit)
    finally:
        await stores.close()


def summary_text(summary: dict[str, Any]) -> str:
    lines = [f"{summary['namespace']}: {summary['memories']} live memories, "
             f"{len(summary['merges'])} merges would be made (dry run: nothing changed)"]
    for merge in summary["merges"]:
        lines.append(f"\n{merge['new_id']} <- {len(merge['members'])} memories")
        lines += [f"  {'*' if m['record_id'] == merge['medoid_id'] else '-'} "
                  f"{m['record_id']}: {m['text']}" for m in merge["members"]]
        lines += ["  = " + line for line in merge["text"].splitlines()]
    return "\n".join(lines)


def report_text(report: MaintenanceReport) -> str:
    timings = ", ".join(f"{phase} {seconds:.3f}s"
                        for phase, seconds in sorted(report.timings.items()))
    lines = [f"{report.report_id} {report.namespace} ({report.reason}) "
             f"finished {report.finished_at:%Y-%m-%d %H:%M:%S}: {report.memories} memories, "
             f"{len(report.clusters)} clusters, {len(report.merged_ids)} superseded",
             f"  timings: {timings}"]
    lines += [f"  {cluster['new_id']} <- {', '.join(cluster['members'])}"
              for cluster in report.clusters]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams.commands.consolidate",
                                     description="Consolidate a namespace's memories.")
    parser.add_argument("--namespace", required=True)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print what would merge")
    mode.add_argument("--reports", action="store_true", help="list the maintenance reports")
    parser.add_argument("--limit", type=int, default=20, help="reports to list (default 20)")
    parser.add_argument("--wait", type=float, default=300.0,
                        help="seconds to wait for the report of a real run (default 300)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    try:
        if args.dry_run:
            summary = asyncio.run(dry_run(settings, args.namespace))
            print(json.dumps(jsonable(summary), indent=2) if args.json
                  else summary_text(summary))
            return 0
        if args.reports:
            reports = asyncio.run(list_reports(settings, args.namespace, args.limit))
        else:
            reports = [asyncio.run(request_and_wait(settings, args.namespace, args.wait))]
    except Exception as exc:  # a command: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(jsonable(reports), indent=2))
    else:
        print("\n".join(report_text(report) for report in reports) or "no reports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
