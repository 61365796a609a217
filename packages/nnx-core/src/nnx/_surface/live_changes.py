"""Recording a net changed in place as the run's transform recipes (spec §11.1, §4.2).

``apply_lora_to(model.net, ...)`` then ``model.train(...)``: before the run is reserved,
:func:`recording_live_changes` compares ``model.net`` with the net its params build
(the recorded recipes replayed) and appends the recipes that reproduce the difference
to ``model.transforms``, from where the run id and every checkpoint carry them
(:func:`nnx.transforms.live.live_recipes`; a change no registered op reproduces is
refused there). Should training then raise, ``model.transforms`` is put back: the
next call detects the same change again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nnx.models.construct import build_reference
from nnx.transforms import replay_transforms
from nnx.transforms.live import live_recipes

__all__ = ["recording_live_changes"]


@contextmanager
def recording_live_changes(model: Any, *, salt: str | None, what: str) -> Iterator[None]:
    """``model.transforms`` extended by the recipes of ``model.net``'s in-place changes
    for the body; restored if the body raises. Refuses (LiveTopologyError) before the
    body runs when a change cannot be recorded."""
    previous = model.transforms
    try:
        reference = build_reference(model.net_params, model.params)
        if reference is not None:
            replay_transforms(reference, previous, base=model.params.net)
    except Exception:
        # No build to compare with (a net that cannot be built again on the meta
        # device): training needs none, so the check steps aside rather than refuse.
        reference = None
    if reference is not None:  # None too for a runtime module: nothing builds it
        found = live_recipes(model.net, reference, what=what, salt=salt)
        model.transforms = (*previous, *found)
    try:
        yield
    except BaseException:
        model.transforms = previous
        raise
