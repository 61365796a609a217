"""Run bundles (spec §22): a run checkpoint as data only, to validate, rebuild and resume.

``export_bundle(run_id, dir)`` → ``inspect_bundle(dir)`` → ``validate_bundle(dir)`` →
``reconstruct_bundle(dir, factories=...)`` → ``ReconstructedBundle.resume(params)``.
See docs/bundles.md and SECURITY.md.
"""

from nnx._contracts.calibrators import (
    BundleCalibrator,
    model_fingerprint,
    register_calibrator_reader,
    registered_calibrator_readers,
    unregister_calibrator_reader,
)
from nnx._persistence.bundle_boundary import inspect_bundle_result
from nnx._persistence.bundle_format import (
    BundleCapabilityError,
    BundleExportError,
    BundleReconstructionError,
    BundleValidationError,
)
from nnx._persistence.bundle_info import BundleInfo
from nnx._persistence.bundle_read import inspect_bundle, validate_bundle
from nnx._surface.bundle_export import export_bundle
from nnx._surface.bundles import ReconstructedBundle, reconstruct_bundle

__all__ = [
    "BundleCalibrator",
    "BundleCapabilityError",
    "BundleExportError",
    "BundleInfo",
    "BundleReconstructionError",
    "BundleValidationError",
    "ReconstructedBundle",
    "export_bundle",
    "inspect_bundle",
    "inspect_bundle_result",
    "model_fingerprint",
    "reconstruct_bundle",
    "register_calibrator_reader",
    "registered_calibrator_readers",
    "unregister_calibrator_reader",
    "validate_bundle",
]
