"""The Faust app's `broker_credentials` for a KafkaSecurity: the agents' consumer and the
app's producer connect as the worker's plain aiokafka clients do."""

from __future__ import annotations

import faust
from faust.types.auth import CredentialsT

from publisher.kafka_security import KafkaSecurity


def broker_credentials(security: KafkaSecurity) -> CredentialsT | None:
    if security.uses_sasl:
        # With a TLS context Faust speaks SASL_SSL, without one SASL_PLAINTEXT.
        return faust.SASLCredentials(username=security.username, password=security.password,
                                     mechanism=security.sasl_mechanism,
                                     ssl_context=security.ssl_context())
    context = security.ssl_context()
    return None if context is None else faust.SSLCredentials(context)
