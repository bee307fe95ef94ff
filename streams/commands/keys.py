"""Make, list and revoke API keys (processors/api/access.py), straight in Postgres.

    python -m streams.commands.keys create --namespace team-a --perm read,write [--agent finn]
    python -m streams.commands.keys create --all-namespaces --perm admin --label ops
    python -m streams.commands.keys list [--namespace team-a]
    python -m streams.commands.keys revoke KEY_ID

A key's token is printed once, when it is made: only its hash is kept.
Postgres: $MEMSTREAM_PG_DSN, else the local server's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from processors.api.access import PERMISSIONS, parse_permissions
from stores.api_keys import KeyGrant, PostgresApiKeys
from stores.postgres.migrate import apply_migrations
from streams.api.operations.keys import key_answer, made_key
from streams.plumbing.config import Settings


async def run(args: argparse.Namespace, dsn: str) -> int:
    await apply_migrations(dsn)
    keys = await PostgresApiKeys.connect(dsn)
    try:
        if args.command == "create":
            if (args.namespace is None) == (not args.all_namespaces):
                print("give --namespace NAME or --all-namespaces", file=sys.stderr)
                return 2
            made = await keys.make_key(KeyGrant(args.namespace, parse_permissions(args.perm),
                                                 args.agent, args.label))
            print(json.dumps(made_key(made.key, made.token).model_dump(mode="json"), indent=2))
            print("The token is shown this once; only its hash is kept.", file=sys.stderr)
        elif args.command == "list":
            for key in await keys.keys(args.namespace):
                print(json.dumps(key_answer(key).model_dump(mode="json")))
        elif args.command == "revoke":
            revoked = await keys.revoke(args.key_id)
            if revoked is None:
                print(f"no key {args.key_id!r}", file=sys.stderr)
                return 1
            print(json.dumps(key_answer(revoked).model_dump(mode="json")))
        return 0
    finally:
        await keys.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m streams.commands.keys", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="make a key and print its token once")
    create.add_argument("--namespace")
    create.add_argument("--all-namespaces", action="store_true",
                        help="an operator's key, for every namespace")
    create.add_argument("--perm", required=True,
                        help=f"comma-separated: {', '.join(PERMISSIONS)}")
    create.add_argument("--agent", help="bind the key to one agent")
    create.add_argument("--label", default="")
    listing = commands.add_parser("list", help="the keys (never their tokens)")
    listing.add_argument("--namespace")
    revoke = commands.add_parser("revoke", help="revoke a key: it stops working at once")
    revoke.add_argument("key_id")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    try:
        code = asyncio.run(run(args, settings.pg_dsn))
    except ValueError as exc:
        parser.error(str(exc))
    sys.exit(code)


if __name__ == "__main__":
    main()
