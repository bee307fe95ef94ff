"""How a Kafka client authenticates and encrypts: one immutable description for the worker,
the publisher and the tools, read from MEMSTREAM_KAFKA_* or built in code.

    KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                  username="memstream", password=os.environ["KAFKA_PASSWORD"])

A managed cluster (Confluent Cloud, MSK, Aiven, …) wants SASL_SSL; its certificate is signed
by a public CA, so `ssl_cafile` stays empty and the system's CAs are used. The description is
checked when it is made, so that a bad combination fails at start-up with the variable to fix,
not as a connection that never succeeds.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypedDict, cast, get_args

from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

ENV_PREFIX = "MEMSTREAM_KAFKA_"
_TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class KafkaClientOptions(TypedDict):
    """The keyword arguments of aiokafka's producer, consumer and admin client that carry
    the connection's security."""

    security_protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None
    sasl_mechanism: SaslMechanism
    sasl_plain_username: str | None
    sasl_plain_password: str | None


@dataclass(frozen=True)
class KafkaSecurity:
    protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism = "PLAIN"
    username: str = ""
    password: str = field(default="", repr=False)
    # Without a CA file the system's CAs verify the broker, as a managed cluster needs.
    ssl_cafile: Path | None = None
    # A client certificate, for brokers that authenticate clients by TLS (mTLS).
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_key_password: str = field(default="", repr=False)
    ssl_check_hostname: bool = True

    def __post_init__(self) -> None:
        if self.protocol not in get_args(SecurityProtocol):
            raise ValueError(f"{ENV_PREFIX}SECURITY_PROTOCOL: unknown {self.protocol!r}; "
                             f"expected one of {', '.join(get_args(SecurityProtocol))}")
        if self.sasl_mechanism not in get_args(SaslMechanism):
            raise ValueError(f"{ENV_PREFIX}SASL_MECHANISM: unknown {self.sasl_mechanism!r}; "
                             f"expected one of {', '.join(get_args(SaslMechanism))}")
        if self.uses_sasl:
            if not self.username or not self.password:
                raise ValueError(f"{self.protocol} needs a username and a password "
                                 f"({ENV_PREFIX}SASL_USERNAME, {ENV_PREFIX}SASL_PASSWORD)")
        elif self.username or self.password:
            # Credentials without SASL would be silently ignored: the cluster then refuses
            # the connection with no word about the forgotten protocol.
            raise ValueError(f"a SASL username or password is set but {self.protocol} does "
                             f"not use SASL: set {ENV_PREFIX}SECURITY_PROTOCOL to SASL_SSL "
                             "or SASL_PLAINTEXT")
        tls_files = {"SSL_CAFILE": self.ssl_cafile, "SSL_CERTFILE": self.ssl_certfile,
                     "SSL_KEYFILE": self.ssl_keyfile}
        if not self.uses_tls and any(tls_files.values()):
            raise ValueError(f"TLS files are set but {self.protocol} does not use TLS: set "
                             f"{ENV_PREFIX}SECURITY_PROTOCOL to SSL or SASL_SSL")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError(f"{ENV_PREFIX}SSL_KEYFILE needs {ENV_PREFIX}SSL_CERTFILE, the "
                             "certificate of that key")
        for name, path in tls_files.items():
            if path is not None and not path.is_file():
                raise ValueError(f"{ENV_PREFIX}{name}: no such file {str(path)!r}")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in _SASL_PROTOCOLS

    @property
    def uses_tls(self) -> bool:
        return self.protocol in _TLS_PROTOCOLS

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> KafkaSecurity:
        """From MEMSTREAM_KAFKA_SECURITY_PROTOCOL, _SASL_MECHANISM, _SASL_USERNAME,
        _SASL_PASSWORD, _SSL_CAFILE, _SSL_CERTFILE, _SSL_KEYFILE, _SSL_KEY_PASSWORD and
        _SSL_CHECK_HOSTNAME; all optional (plaintext)."""

        def get(name: str) -> str:
            return env.get(ENV_PREFIX + name, "").strip()

        def path(name: str) -> Path | None:
            return Path(get(name)) if get(name) else None

        return cls(
            protocol=cast(SecurityProtocol, get("SECURITY_PROTOCOL").upper() or "PLAINTEXT"),
            sasl_mechanism=cast(SaslMechanism, get("SASL_MECHANISM").upper() or "PLAIN"),
            username=get("SASL_USERNAME"),
            # A password may begin or end with spaces: taken as it is.
            password=env.get(ENV_PREFIX + "SASL_PASSWORD", ""),
            ssl_cafile=path("SSL_CAFILE"),
            ssl_certfile=path("SSL_CERTFILE"),
            ssl_keyfile=path("SSL_KEYFILE"),
            ssl_key_password=env.get(ENV_PREFIX + "SSL_KEY_PASSWORD", ""),
            ssl_check_hostname=_check_hostname(get("SSL_CHECK_HOSTNAME") or "true"),
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        """A new TLS context for this description, None without TLS."""
        if not self.uses_tls:
            return None
        context: ssl.SSLContext = create_ssl_context(
            cafile=self.ssl_cafile, certfile=self.ssl_certfile, keyfile=self.ssl_keyfile,
            password=self.ssl_key_password or None)
        context.check_hostname = self.ssl_check_hostname
        return context

    def client_options(self) -> KafkaClientOptions:
        """The keyword arguments for AIOKafkaProducer, AIOKafkaConsumer and
        AIOKafkaAdminClient."""
        return KafkaClientOptions(
            security_protocol=self.protocol,
            ssl_context=self.ssl_context(),
            sasl_mechanism=self.sasl_mechanism,
            sasl_plain_username=self.username if self.uses_sasl else None,
            sasl_plain_password=self.password if self.uses_sasl else None,
        )


def _check_hostname(raw: str) -> bool:
    value = raw.lower()
    if value not in ("true", "false"):
        raise ValueError(f"{ENV_PREFIX}SSL_CHECK_HOSTNAME: expected true or false, got {raw!r}")
    return value == "true"


PLAINTEXT = KafkaSecurity()


class _ErrorMessages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def connection_failures_explained() -> Iterator[None]:
    """Around a client's start: a KafkaConnectionError raised inside carries the reasons.

    aiokafka raises only "Unable to bootstrap from [...]" and tells why (a refused password,
    an untrusted certificate, a refused connection) in its log alone; a caller that shows the
    error, not the log, would not know what to fix."""
    reasons = _ErrorMessages()
    aiokafka_log = logging.getLogger("aiokafka")
    aiokafka_log.addHandler(reasons)
    try:
        yield
    except KafkaConnectionError as exc:
        if not reasons.messages:
            raise
        raise KafkaConnectionError(f"{exc}: {'; '.join(reasons.messages)}") from exc
    finally:
        aiokafka_log.removeHandler(reasons)
