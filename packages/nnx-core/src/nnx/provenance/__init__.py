"""Provenance (spec §4.4): experiment fingerprints, attempts and comparisons.

Opt-in and separate from the run id: an :class:`ExperimentManifest` names the
declared intent (task, labels, model, data and split identities, objective,
config) and its SHA-256 fingerprint; :func:`begin_attempt` records one
execution in ``provenance.json`` / ``attempt.json``; :func:`read_provenance`
and :func:`compare` read those files back, verified.

Each name is imported on first use (issue 38): a fit without ``provenance=`` loads
none of this package's modules but the file names' (``_files``).
"""

from typing import TYPE_CHECKING

from nnx._foundation.lazy_exports import lazy_package

#: name -> the module it is read from; the TYPE_CHECKING block below lists the same.
_EXPORTS: dict[str, str] = {
    "Attempt": "nnx.provenance.attempt",
    "AttemptRecord": "nnx.provenance.record",
    "Comparison": "nnx.provenance.compare",
    "ExperimentManifest": "nnx.provenance.manifest",
    "IdentityRef": "nnx.provenance.identity",
    "RunProvenance": "nnx.provenance.reading",
    "begin_attempt": "nnx.provenance.attempt",
    "compare": "nnx.provenance.compare",
    "declared": "nnx.provenance.identity",
    "hash_bytes": "nnx.provenance.identity",
    "hash_file": "nnx.provenance.identity",
    "read_provenance": "nnx.provenance.reading",
}

__all__ = sorted(_EXPORTS)

lazy_package(__name__)

if TYPE_CHECKING:
    from nnx.provenance.attempt import Attempt as Attempt
    from nnx.provenance.attempt import begin_attempt as begin_attempt
    from nnx.provenance.compare import Comparison as Comparison
    from nnx.provenance.compare import compare as compare
    from nnx.provenance.identity import IdentityRef as IdentityRef
    from nnx.provenance.identity import declared as declared
    from nnx.provenance.identity import hash_bytes as hash_bytes
    from nnx.provenance.identity import hash_file as hash_file
    from nnx.provenance.manifest import ExperimentManifest as ExperimentManifest
    from nnx.provenance.reading import RunProvenance as RunProvenance
    from nnx.provenance.reading import read_provenance as read_provenance
    from nnx.provenance.record import AttemptRecord as AttemptRecord
