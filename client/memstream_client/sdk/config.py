"""Where a client finds the worker, its key and the default namespace: what the caller gives
first (the SDK's arguments, the CLI's flags), then the environment (`MEMSTREAM_URL`,
`MEMSTREAM_API_KEY`, `MEMSTREAM_NAMESPACE`), then a TOML file (`$MEMSTREAM_CONFIG`, else
`$XDG_CONFIG_HOME/memstream/config.toml`, by default `~/.config/memstream/config.toml`) with
`url`, `key` and `namespace`."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstream_client.sdk.errors import ConfigError

DEFAULT_URL = "http://127.0.0.1:6066"
SETTINGS = ("url", "key", "namespace")


@dataclass(frozen=True)
class Config:
    url: str
    key: str | None
    namespace: str | None
    # The file read, if any: named in the errors that a setting of it may cause.
    source: Path | None = None


def config_path(env: Mapping[str, str]) -> tuple[Path, bool]:
    """The config file, and whether it was named explicitly (then it must exist)."""
    named = env.get("MEMSTREAM_CONFIG")
    if named:
        return Path(named).expanduser(), True
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "memstream" / "config.toml", False


def read_file(path: Path, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise ConfigError(f"config file {path} does not exist")
        return {}
    try:
        settings = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    for name in SETTINGS:
        if name in settings and not isinstance(settings[name], str):
            raise ConfigError(f"{path}: {name} must be a string")
    return settings


def load_config(env: Mapping[str, str], *, url: str | None = None, key: str | None = None,
                namespace: str | None = None) -> Config:
    """The settings: each given one, else its variable in `env`, else the file's."""
    path, required = config_path(env)
    settings = read_file(path, required)

    def setting(given: str | None, variable: str, name: str) -> str | None:
        value = given or env.get(variable) or settings.get(name)
        return value.strip() if value else None

    return Config(
        url=(setting(url, "MEMSTREAM_URL", "url") or DEFAULT_URL).rstrip("/"),
        key=setting(key, "MEMSTREAM_API_KEY", "key"),
        namespace=setting(namespace, "MEMSTREAM_NAMESPACE", "namespace"),
        source=path if settings else None,
    )
