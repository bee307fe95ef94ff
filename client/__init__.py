"""A small publisher for Python orchestrators."""

from client.kafka_security import KafkaSecurity
from client.publisher import Publisher, envelope

__all__ = ["KafkaSecurity", "Publisher", "envelope"]
