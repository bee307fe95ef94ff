"""Wiring: the Faust app, its agents and web views, moving data between topics, processors
and stores."""
