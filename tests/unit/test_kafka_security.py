"""KafkaSecurity: read from MEMSTREAM_KAFKA_*, refused when it cannot work, never showing a
password, and the same connection for aiokafka's clients and the Faust app."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka.errors import KafkaConnectionError
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from publisher.kafka_security import PLAINTEXT, KafkaSecurity, connection_failures_explained
from streams.plumbing.config import Settings
from streams.plumbing.faust_credentials import broker_credentials

SCRAM_SSL = {
    "MEMSTREAM_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
    "MEMSTREAM_KAFKA_SASL_MECHANISM": "scram-sha-512",
    "MEMSTREAM_KAFKA_SASL_USERNAME": "memstream",
    "MEMSTREAM_KAFKA_SASL_PASSWORD": "s3cret-Pa55",
}


def test_nothing_set_is_plaintext() -> None:
    security = KafkaSecurity.from_env({})
    assert security == PLAINTEXT
    assert security.client_options() == {
        "security_protocol": "PLAINTEXT", "ssl_context": None, "sasl_mechanism": "PLAIN",
        "sasl_plain_username": None, "sasl_plain_password": None}
    assert broker_credentials(security) is None


def test_sasl_ssl_with_scram_as_a_managed_cluster_asks() -> None:
    security = KafkaSecurity.from_env(SCRAM_SSL)
    options = security.client_options()
    assert (options["security_protocol"], options["sasl_mechanism"]) == ("SASL_SSL",
                                                                        "SCRAM-SHA-512")
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("memstream",
                                                                                "s3cret-Pa55")
    context = options["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED


def test_the_hostname_check_can_be_turned_off_for_brokers_known_by_address() -> None:
    security = KafkaSecurity.from_env({**SCRAM_SSL, "MEMSTREAM_KAFKA_SSL_CHECK_HOSTNAME": "false"})
    context = security.ssl_context()
    assert context is not None and not context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_tls_files_are_read_from_the_environment(tmp_path: Path) -> None:
    for name in ("ca.pem", "client.pem", "client.key"):
        (tmp_path / name).touch()
    security = KafkaSecurity.from_env({
        "MEMSTREAM_KAFKA_SECURITY_PROTOCOL": "SSL",
        "MEMSTREAM_KAFKA_SSL_CAFILE": str(tmp_path / "ca.pem"),
        "MEMSTREAM_KAFKA_SSL_CERTFILE": str(tmp_path / "client.pem"),
        "MEMSTREAM_KAFKA_SSL_KEYFILE": str(tmp_path / "client.key"),
        "MEMSTREAM_KAFKA_SSL_KEY_PASSWORD": "key-secret",
    })
    assert (security.ssl_cafile, security.ssl_certfile, security.ssl_keyfile) == (
        tmp_path / "ca.pem", tmp_path / "client.pem", tmp_path / "client.key")
    assert security.ssl_key_password == "key-secret"


@pytest.mark.parametrize(("env", "complaint"), [
    ({"MEMSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_TLS"}, "SECURITY_PROTOCOL: unknown 'SASL_TLS'"),
    ({**SCRAM_SSL, "MEMSTREAM_KAFKA_SASL_MECHANISM": "GSSAPI"}, "SASL_MECHANISM: unknown"),
    ({**SCRAM_SSL, "MEMSTREAM_KAFKA_SASL_PASSWORD": ""}, "SASL_SSL needs a username and a"),
    ({**SCRAM_SSL, "MEMSTREAM_KAFKA_SASL_USERNAME": ""}, "SASL_SSL needs a username and a"),
    ({"MEMSTREAM_KAFKA_SASL_USERNAME": "memstream", "MEMSTREAM_KAFKA_SASL_PASSWORD": "x"},
     "PLAINTEXT does not use SASL"),
    ({"MEMSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "MEMSTREAM_KAFKA_SASL_USERNAME": "u",
      "MEMSTREAM_KAFKA_SASL_PASSWORD": "p", "MEMSTREAM_KAFKA_SSL_CAFILE": "/etc/hostname"},
     "SASL_PLAINTEXT does not use TLS"),
    ({**SCRAM_SSL, "MEMSTREAM_KAFKA_SSL_CAFILE": "/nonexistent/ca.pem"},
     "SSL_CAFILE: no such file '/nonexistent/ca.pem'"),
    ({**SCRAM_SSL, "MEMSTREAM_KAFKA_SSL_KEYFILE": "/etc/hostname"}, "SSL_KEYFILE needs"),
    ({**SCRAM_SSL, "MEMSTREAM_KAFKA_SSL_CHECK_HOSTNAME": "maybe"}, "expected true or false"),
])
def test_a_configuration_that_cannot_work_is_refused_naming_what_to_fix(
        env: dict[str, str], complaint: str) -> None:
    with pytest.raises(ValueError) as refused:
        KafkaSecurity.from_env(env)
    assert complaint in str(refused.value)


def test_the_worker_settings_carry_it_without_showing_the_password() -> None:
    settings = Settings.from_env({**SCRAM_SSL, "MEMSTREAM_PG_DSN": "postgresql:///x",
                                  "MEMSTREAM_KAFKA_BOOTSTRAP": "kafka.example.com:9096"})
    assert settings.kafka_security == KafkaSecurity.from_env(SCRAM_SSL)
    assert "s3cret-Pa55" not in repr(settings)
    assert "memstream" in repr(settings.kafka_security)


def test_repr_shows_no_secret() -> None:
    security = KafkaSecurity(protocol="SASL_SSL", username="memstream", password="s3cret-Pa55",
                             ssl_key_password="key-secret")
    assert "s3cret-Pa55" not in repr(security) and "key-secret" not in repr(security)
    assert "s3cret-Pa55" not in repr(broker_credentials(security))


def without_context(options: Any) -> dict[str, Any]:
    found = dict(options)
    context = found.pop("ssl_context", None)
    found["tls"] = context is not None
    return found


@pytest.mark.parametrize("env", [
    SCRAM_SSL,
    {**SCRAM_SSL, "MEMSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
     "MEMSTREAM_KAFKA_SASL_MECHANISM": "PLAIN"},
    {"MEMSTREAM_KAFKA_SECURITY_PROTOCOL": "SSL"},
])
def test_the_faust_app_connects_as_the_plain_clients_do(env: dict[str, str]) -> None:
    security = KafkaSecurity.from_env(env)
    faust_options = credentials_to_aiokafka_auth(broker_credentials(security))
    plain_options = {key: value for key, value in security.client_options().items()
                     if value is not None and key in faust_options}
    assert without_context(faust_options) == without_context(plain_options)
    if security.protocol == "SSL":
        assert isinstance(broker_credentials(security), faust.SSLCredentials)


def test_a_failed_bootstrap_says_why() -> None:
    with pytest.raises(KafkaConnectionError) as failed, connection_failures_explained():
        logging.getLogger("aiokafka").error("Unable connect to %s: %s", "kafka:9096",
                                            "SaslAuthenticationFailed: Invalid password")
        raise KafkaConnectionError("Unable to bootstrap from [('kafka', 9096)]")
    assert "Unable to bootstrap" in str(failed.value)
    assert "SaslAuthenticationFailed: Invalid password" in str(failed.value)


def test_other_failures_pass_unchanged() -> None:
    original = KafkaConnectionError("Unable to bootstrap")
    with pytest.raises(KafkaConnectionError) as failed, connection_failures_explained():
        raise original
    assert failed.value is original
