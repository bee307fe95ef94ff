"""The worker: a Faust app per role (app.py), wired (wiring.py) from the HTTP face (api/) and
the stream stages (stages/), both standing on the read core (reads/), which stands on the
plumbing (plumbing/); the entry point is worker.py, operators' commands are in commands/."""
