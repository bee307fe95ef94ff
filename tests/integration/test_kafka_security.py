"""Kafka security on a real broker of this module's own, secured as a managed cluster is: a
SASL_PLAINTEXT and a SASL_SSL listener with PLAIN and SCRAM users (infra/kafka/broker.sh's
KAFKA_SECURE_LISTENERS), its certificate signed by a CA made here with openssl (nothing
committed). Topic creation (the `streams.plumbing.topics` command, reading MEMSTREAM_KAFKA_* as the
worker does, and `ensure_topics`), the Publisher and a consumer work over each; a wrong password
or an untrusted certificate fails at once, saying why; a worker on SASL_SSL announces a write."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from aiokafka.errors import KafkaConnectionError

from harness.kafka_io import TopicReader
from harness.stack import Broker, Stack, Worker
from publisher import KafkaSecurity, Publisher
from publisher.kafka_security import SaslMechanism, SecurityProtocol
from schemas.topics import MEMORY_EVENTS, MEMORY_UPDATED, TopicSpec
from streams.plumbing.config import REPO_ROOT
from streams.plumbing.topics import ensure_topics
from tests.integration.conftest import updated_ids

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
KEYSTORE_PASSWORD = "keystore-secret"
# A refused login or certificate is answered in well under a second; this only bounds a hang.
FAILS_WITHIN_S = 15.0

CONNECTIONS: list[tuple[SecurityProtocol, SaslMechanism]] = [
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-512"),
]


@dataclass(frozen=True)
class Tls:
    ca: Path
    keystore: Path


@dataclass(frozen=True)
class Connection:
    bootstrap: str
    security: KafkaSecurity


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    """A CA, and the broker's key and certificate for 127.0.0.1 signed by it, as PKCS12."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the test CA")
    directory = tmp_path_factory.mktemp("tls")

    def file(name: str) -> str:
        return str(directory / name)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=memstream test CA", "-keyout", file("ca.key"), "-out", file("ca.pem"))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", file("broker.key"), "-out", file("broker.csr"))
    (directory / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", file("broker.csr"), "-CA", file("ca.pem"),
            "-CAkey", file("ca.key"), "-CAcreateserial", "-days", "2",
            "-extfile", file("san.cnf"), "-out", file("broker.pem"))
    openssl("pkcs12", "-export", "-in", file("broker.pem"), "-inkey", file("broker.key"),
            "-passout", f"pass:{KEYSTORE_PASSWORD}", "-out", file("broker.p12"))
    return Tls(ca=directory / "ca.pem", keystore=directory / "broker.p12")


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, tls: Tls) -> Iterator[Broker]:
    broker = Broker(tmp_path_factory.mktemp("secure-kafka"), create_topics=False, extra_env={
        "KAFKA_SECURE_LISTENERS": "SASL_PLAINTEXT,SASL_SSL",
        "KAFKA_SASL_USERS": ",".join(f"{name}:{password}" for name, password in USERS.items()),
        "KAFKA_SSL_KEYSTORE": str(tls.keystore),
        "KAFKA_SSL_KEYSTORE_PASSWORD": KEYSTORE_PASSWORD,
    })
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


def connection(broker: Broker, tls: Tls, protocol: SecurityProtocol,
               mechanism: SaslMechanism, user: str = "alice") -> Connection:
    return Connection(broker.listener(protocol), KafkaSecurity(
        protocol=protocol, sasl_mechanism=mechanism, username=user, password=USERS[user],
        ssl_cafile=tls.ca if protocol == "SASL_SSL" else None))


def security_env(security: KafkaSecurity) -> dict[str, str]:
    """The worker's and the tools' variables for `security`."""
    env = {"MEMSTREAM_KAFKA_SECURITY_PROTOCOL": security.protocol,
           "MEMSTREAM_KAFKA_SASL_MECHANISM": security.sasl_mechanism,
           "MEMSTREAM_KAFKA_SASL_USERNAME": security.username,
           "MEMSTREAM_KAFKA_SASL_PASSWORD": security.password}
    if security.ssl_cafile is not None:
        env["MEMSTREAM_KAFKA_SSL_CAFILE"] = str(security.ssl_cafile)
    return env


@pytest.fixture(scope="module")
def topics_command(secure_broker: Broker, tls: Tls) -> subprocess.CompletedProcess[str]:
    """`python -m streams.commands.topics` over SASL_SSL with SCRAM-SHA-512, as an operator runs it
    against a managed cluster: the topics every other test here uses."""
    managed = connection(secure_broker, tls, "SASL_SSL", "SCRAM-SHA-512", user="bob")
    return subprocess.run(
        [sys.executable, "-m", "streams.commands.topics", "--bootstrap", managed.bootstrap],
        cwd=REPO_ROOT, env={**os.environ, **security_env(managed.security)},
        capture_output=True, text=True, timeout=120)


def test_the_topics_command_creates_the_topics_over_sasl_ssl(
        topics_command: subprocess.CompletedProcess[str]) -> None:
    assert topics_command.returncode == 0, topics_command.stderr
    assert f"created  {MEMORY_EVENTS} " in topics_command.stdout
    assert "0 already existed" in topics_command.stdout


@pytest.mark.parametrize(("protocol", "mechanism"), CONNECTIONS)
async def test_topics_publisher_and_consumer_work(
        secure_broker: Broker, tls: Tls, topics_command: subprocess.CompletedProcess[str],
        protocol: SecurityProtocol, mechanism: SaslMechanism) -> None:
    kafka = connection(secure_broker, tls, protocol, mechanism)
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    assert await ensure_topics(kafka.bootstrap, [TopicSpec(topic, 1, 1)],
                               kafka.security) == [topic]

    namespace = f"ns-{uuid.uuid4().hex[:10]}"
    async with TopicReader(kafka.bootstrap, MEMORY_EVENTS, kafka.security) as events:
        async with Publisher(kafka.bootstrap, producer="tests",
                             security=kafka.security) as publisher:
            await publisher.write_memory(namespace, f"Sent over {protocol} {mechanism}.")
        await events.wait_for(lambda read: any(namespace.encode() in m.value for m in read),
                              timeout_s=30)


@pytest.mark.parametrize(("protocol", "mechanism"), [("SASL_PLAINTEXT", "SCRAM-SHA-256"),
                                                     ("SASL_SSL", "PLAIN")])
async def test_a_wrong_password_fails_at_once_saying_why(
        secure_broker: Broker, tls: Tls, protocol: SecurityProtocol,
        mechanism: SaslMechanism) -> None:
    kafka = connection(secure_broker, tls, protocol, mechanism)
    wrong = replace(kafka.security, password="not-the-password")
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match="SaslAuthenticationFailed"):
        async with Publisher(kafka.bootstrap, producer="tests", security=wrong):
            pass
    with pytest.raises(KafkaConnectionError, match="SaslAuthenticationFailed"):
        await ensure_topics(kafka.bootstrap, [TopicSpec("never-created", 1, 1)], wrong)
    assert time.monotonic() - started < FAILS_WITHIN_S


async def test_an_untrusted_broker_certificate_fails_at_once_saying_why(
        secure_broker: Broker, tls: Tls) -> None:
    kafka = connection(secure_broker, tls, "SASL_SSL", "SCRAM-SHA-512")
    # Without the test CA only the system's CAs are trusted, as for a managed cluster.
    system_cas = replace(kafka.security, ssl_cafile=None)
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        async with Publisher(kafka.bootstrap, producer="tests", security=system_cas):
            pass
    assert time.monotonic() - started < FAILS_WITHIN_S


@pytest.fixture(scope="module")
async def secure_updates(secure_broker: Broker, tls: Tls,
                         topics_command: subprocess.CompletedProcess[str],
                         ) -> AsyncIterator[TopicReader]:
    kafka = connection(secure_broker, tls, "SASL_SSL", "SCRAM-SHA-512")
    async with TopicReader(kafka.bootstrap, MEMORY_UPDATED, kafka.security) as reader:
        yield reader


async def test_a_worker_over_sasl_ssl_announces_a_write(
        stack: Stack, secure_broker: Broker, tls: Tls, secure_updates: TopicReader,
        tmp_path: Path) -> None:
    """The worker's every Kafka client (the Faust app's consumer and producer, its own
    producer, the topics, the announcement log, the lag probe) on SASL_SSL with SCRAM; only
    Postgres is the session stack's."""
    kafka = connection(secure_broker, tls, "SASL_SSL", "SCRAM-SHA-512", user="bob")
    worker = Worker(bootstrap=kafka.bootstrap, pg_dsn=stack.pg_dsn,
                    index_url=f"edge://{tmp_path / 'index'}", log_path=tmp_path / "worker.log",
                    extra_env={**security_env(kafka.security), "MEMSTREAM_LAG_INTERVAL_S": "0.5"})
    worker.start()
    try:
        namespace = f"ns-{uuid.uuid4().hex[:10]}"
        async with Publisher(kafka.bootstrap, producer="tests",
                             security=kafka.security) as publisher:
            record_id = await publisher.write_memory(
                namespace, "The staging cluster only accepts SASL_SSL with SCRAM-SHA-512.")
        await secure_updates.wait_for(
            lambda read: record_id in updated_ids(read, namespace), timeout_s=60)
    finally:
        worker.stop()
