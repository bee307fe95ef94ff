"""A small publisher for Python orchestrators: events straight to Kafka (the worker's
distribution; the client distribution, `memstream_client`, speaks HTTP only)."""

from publisher.kafka_publisher import Publisher, envelope
from publisher.kafka_security import KafkaSecurity

__all__ = ["KafkaSecurity", "Publisher", "envelope"]
