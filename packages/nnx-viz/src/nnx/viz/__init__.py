"""nnx-viz: model-internals visualization (spec §12), every figure Plotly.

``summary`` (torchinfo's parameter table, tied tensors counted once), ``weight_histogram``,
``activation_map``, ``gradient_flow``, ``attribute`` (six Captum methods, one call,
returning the attribution and its heatmap) and ``netron_export`` (ONNX for Netron).
The helpers that run the model keep the non-destructive contract (§13.2): modes,
``requires_grad`` flags, gradients and hooks put back, also when they raise. The
optional packages are imported by the call that needs them: without one, that call
raises an ImportError naming the install before any work. See docs/viz.md.
"""

from nnx.viz.activations import activation_map
from nnx.viz.attribution import METHODS, attribute
from nnx.viz.document import netron_export
from nnx.viz.errors import NoGradientError, UnknownLayerError, UnknownMethodError
from nnx.viz.gradients import gradient_flow
from nnx.viz.summary import summary
from nnx.viz.weights import weight_histogram

__nnx_skeleton__ = {"kind": "tool", "verb": "attribution"}

__all__ = [
    "METHODS",
    "NoGradientError",
    "UnknownLayerError",
    "UnknownMethodError",
    "activation_map",
    "attribute",
    "gradient_flow",
    "netron_export",
    "summary",
    "weight_histogram",
]
