"""Layer 1, the foundation: atomic I/O, locking, hashing, validation, the config base,
records, seeding, modes, the environment and the entry-point registries.

Imports nothing else from nnx (docs/architecture.md).
"""
