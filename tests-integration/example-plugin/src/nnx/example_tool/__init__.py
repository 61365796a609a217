"""nnx.example_tool: the template for a tool over runs (docs/extending.md, "Add-on
skeletons"), shipped by nnx-example-plugin beside its training extensions.

:func:`summarize_run` reads one run's document and history (nothing unpickled, no torch
imported) and returns a :class:`RunSummary`: the seed, the parent, and one metric's
validation value per committed epoch, with ``text()`` to print it. One module per part
of the skeleton: ``errors`` (:class:`RunSummaryError`), ``document`` (what it reads on
disk, through nnx-core's run-document readers, never by key), ``inputs`` (checking what
the caller passes, before any file is read), ``summarize`` (the verb) and ``report`` (the
result and its rendering).
"""

from nnx.example_tool.errors import RunSummaryError
from nnx.example_tool.report import RunSummary
from nnx.example_tool.summarize import summarize_run

__all__ = ["RunSummary", "RunSummaryError", "summarize_run"]

# Which skeleton this package follows; nnx-core's conformance kit checks its modules.
__nnx_skeleton__ = {"kind": "tool", "verb": "summarize"}
