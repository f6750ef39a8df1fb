"""Locks: what every image holds, fixed by the repository (issue 49)."""
