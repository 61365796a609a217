"""Provenance (spec §4.4): experiment fingerprints, attempts and comparisons.

Opt-in and separate from the run id: an :class:`ExperimentManifest` names the
declared intent (task, labels, model, data and split identities, objective,
config) and its SHA-256 fingerprint; :func:`begin_attempt` records one
execution in ``provenance.json`` / ``attempt.json``; :func:`read_provenance`
and :func:`compare` read those files back, verified.
"""

from nnx.provenance.attempt import Attempt, begin_attempt
from nnx.provenance.compare import Comparison, compare
from nnx.provenance.identity import IdentityRef, declared, hash_bytes, hash_file
from nnx.provenance.manifest import ExperimentManifest
from nnx.provenance.reading import RunProvenance, read_provenance
from nnx.provenance.record import AttemptRecord

__all__ = [
    "Attempt",
    "AttemptRecord",
    "Comparison",
    "ExperimentManifest",
    "IdentityRef",
    "RunProvenance",
    "begin_attempt",
    "compare",
    "declared",
    "hash_bytes",
    "hash_file",
    "read_provenance",
]
