"""nnx-example-plugin: the reference add-on, and the template for the next distribution.

It joins the ``nnx`` namespace the way every add-on does: it ships the
``nnx/example_plugin/`` directory (never ``nnx/__init__.py``, which belongs to
nnx-core), imports core through ``nnx`` and ``nnx.extend`` only, and announces its
names through entry points in its ``pyproject.toml``, the one list of them:

``nnx.exports``             ``ExampleScaler``     → ``from nnx import ExampleScaler``
``nnx.nets``                ``EXAMPLE_MLP``       → ``Nets.EXAMPLE_MLP(ExampleMLPParams(...))``
``nnx.optimizer_factories`` ``example.sgd@v1``    → :func:`example_sgd`
``nnx.transforms``          ``example.scaled@v1`` → :func:`materialize_scaled`

and shows, one module each: a net (``net``), an optimizer factory (``optim``), an
objective (``objective``), a task written against the Task protocol (``task``), a
transform recipe (``transform``) and an optional crossing to nnx-peft (``crossing``).
Nothing here is imported by ``import nnx``; nnx-core loads each entry the first time
someone asks for its name.
"""

from nnx.example_plugin.crossing import example_lora_recipe
from nnx.example_plugin.net import EXAMPLE_MLP, ExampleMLP, ExampleMLPParams, ExampleScaler
from nnx.example_plugin.objective import HuberObjective
from nnx.example_plugin.optim import example_sgd
from nnx.example_plugin.task import HuberTask
from nnx.example_plugin.transform import (
    SCALED_OP,
    SCALED_VERSION,
    materialize_scaled,
    scaled_recipe,
)

__all__ = [
    "EXAMPLE_MLP",
    "SCALED_OP",
    "SCALED_VERSION",
    "ExampleMLP",
    "ExampleMLPParams",
    "ExampleScaler",
    "HuberObjective",
    "HuberTask",
    "example_lora_recipe",
    "example_sgd",
    "materialize_scaled",
    "scaled_recipe",
]

# Which skeleton this package follows (docs/extending.md, "Add-on skeletons"): training
# extensions, each a params config, its module and one entry point.
__nnx_skeleton__ = {"kind": "training"}
