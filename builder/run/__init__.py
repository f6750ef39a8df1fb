"""Run: the smoke suite of a built image on this machine, and what the host offers."""
