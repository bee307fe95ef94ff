"""The Python SDK of memstream's HTTP API: `MemoryClient` and `AsyncMemoryClient`, answers
read into the models the worker renders them from (memstream_client/answers/), errors that carry the
HTTP status, the dead-letter reason and whether to retry (memstream_client/sdk/errors.py), and the
settings the CLI shares (memstream_client/sdk/config.py). docs/sdk.md shows it in ten lines."""

from memstream_client.sdk._base import Retries
from memstream_client.sdk.client import AsyncMemoryClient, MemoryClient
from memstream_client.sdk.config import Config, load_config
from memstream_client.sdk.errors import (
    BadRequest,
    ConfigError,
    Forbidden,
    MemstreamError,
    NotFound,
    TimedOut,
    Unauthorized,
    Unavailable,
    UnexpectedAnswer,
    Unreachable,
)

__all__ = [
    "AsyncMemoryClient",
    "BadRequest",
    "Config",
    "ConfigError",
    "Forbidden",
    "MemoryClient",
    "MemstreamError",
    "NotFound",
    "Retries",
    "TimedOut",
    "Unauthorized",
    "Unavailable",
    "UnexpectedAnswer",
    "Unreachable",
    "load_config",
]
