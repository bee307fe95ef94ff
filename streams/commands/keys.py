"""Make, list and revoke API keys (processors/access.py), straight in Postgres.

    python -m streams.commands.keys create --namespace team-a --perm read,write [--agent finn]
    python -m streams.commands.keys create --all-namespaces --perm admin --label ops
    python -m streams.commands.keys list [--namespace team-a]
    python -m streams.commands.keys revoke KEY_ID
    python -m streams.commands.keys dev        # make run: an operator key on first start, printed

A key's token is printed once, when it is made: only its hash is kept.
Postgres: $MEMSTREAM_PG_DSN, else the local server's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from processors.access import PERMISSIONS, parse_permissions
from stores.api_keys import KeyGrant, PostgresApiKeys
from stores.migrate import apply_migrations
from streams.api.keys import key_json
from streams.plumbing.config import Settings

DEV_KEY_LABEL = "development key (make run)"


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
            print(json.dumps({**key_json(made.key), "token": made.token}, indent=2))
            print("The token is shown this once; only its hash is kept.", file=sys.stderr)
        elif args.command == "list":
            for key in await keys.keys(args.namespace):
                print(json.dumps(key_json(key)))
        elif args.command == "revoke":
            revoked = await keys.revoke(args.key_id)
            if revoked is None:
                print(f"no key {args.key_id!r}", file=sys.stderr)
                return 1
            print(json.dumps(key_json(revoked)))
        elif args.command == "dev" and args.auth and not await keys.any_key():
            made = await keys.make_key(KeyGrant(None, frozenset(PERMISSIONS), None,
                                                DEV_KEY_LABEL))
            print(f"\n  memstream development key (all namespaces, every permission):\n"
                  f"    export MEMSTREAM_API_KEY={made.token}\n"
                  f"  shown this once; revoke it with: python -m streams.commands.keys revoke "
                  f"{made.key.key_id}\n", flush=True)
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
    commands.add_parser("dev", help="make an operator key if there is no key at all")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    args.auth = settings.auth
    try:
        code = asyncio.run(run(args, settings.pg_dsn))
    except ValueError as exc:
        parser.error(str(exc))
    sys.exit(code)


if __name__ == "__main__":
    main()
