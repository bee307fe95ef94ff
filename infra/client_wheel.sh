#!/usr/bin/env bash
# Builds the client's wheel (client/: memstream-client, the SDK, the CLI, the MCP server) into
# .cache/wheels/, again only when the files under client/ differ from those it was built of
# (their hash is kept beside it), and prints its absolute path. `make setup` runs it; so does the test that installs the wheel alone
# (tests/integration/test_client_alone.py).
set -euo pipefail
cd "$(dirname "$0")/.."

wheel_dir=.cache/wheels
wheel="$wheel_dir/memstream_client-0.1.0-py3-none-any.whl"
PIP=${PIP:-.venv/bin/pip}
sources=$(find client -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*' \
  -not -path 'client/build/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
stamp="$wheel_dir/memstream_client.sources"
if [ ! -f "$wheel" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sources" ]; then
  mkdir -p "$wheel_dir"
  # Built in a temporary copy: setuptools leaves build/ behind in the tree it builds.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp -r client "$tmp/client"
  rm -rf "$tmp"/client/*.egg-info "$tmp/client/build"
  find "$tmp/client" -name __pycache__ -prune -exec rm -rf {} +
  if ! "$PIP" wheel -q --no-deps -w "$tmp/wheels" "$tmp/client" >"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    exit 1
  fi
  mv -f "$tmp"/wheels/memstream_client-0.1.0-py3-none-any.whl "$wheel"
  printf '%s\n' "$sources" >"$stamp"
fi
printf '%s\n' "$(cd "$wheel_dir" && pwd)/$(basename "$wheel")"
