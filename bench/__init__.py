"""Measurements (not tests): `python -m bench.<name>`."""
