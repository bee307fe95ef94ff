"""A small publisher for Python orchestrators."""

from client.publisher import Publisher, envelope

__all__ = ["Publisher", "envelope"]
