"""Helpers shared by several test modules (tests/ is on sys.path: see ../README.md)."""
