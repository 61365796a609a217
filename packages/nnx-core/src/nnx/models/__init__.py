"""Models beyond the Nets enum (spec §3.2): registered factories and runtime modules.

``NNModelParams.net`` holds a ``Nets`` member, a :class:`ModelSpec` (built by a
factory registered with :func:`register_model_factory`) or a
:class:`RuntimeModule` (filled in by ``NNModel(module=...)``). The descriptors
themselves are configuration and live in :mod:`nnx.params.descriptors`, below
this package (which builds from them); this is their public path.
"""

from nnx.models.registry import (
    MissingModelFactoryError,
    ModelFactory,
    build_from_spec,
    register_model_factory,
    registered_model_factories,
    resolve_model_factory,
    unregister_model_factory,
)
from nnx.models.reload_blockers import UnreloadableNetError, reload_blockers
from nnx.models.topology import check_weights_fit, runtime_descriptor, topology_fingerprint
from nnx.params.descriptors import (
    ModelDescriptor,
    ModelSpec,
    RuntimeModule,
    describe,
    descriptor_from_state,
)

__all__ = [
    "MissingModelFactoryError",
    "ModelDescriptor",
    "ModelFactory",
    "ModelSpec",
    "RuntimeModule",
    "UnreloadableNetError",
    "build_from_spec",
    "check_weights_fit",
    "describe",
    "descriptor_from_state",
    "register_model_factory",
    "registered_model_factories",
    "reload_blockers",
    "resolve_model_factory",
    "runtime_descriptor",
    "topology_fingerprint",
    "unregister_model_factory",
]
