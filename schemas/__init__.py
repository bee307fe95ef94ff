"""Contracts: pydantic models of events and records, and their exported JSON Schemas."""
