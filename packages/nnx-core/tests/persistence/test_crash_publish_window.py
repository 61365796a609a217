"""A writer that died in a resume point's publish window (spec §4.2, §14.3): the next
save settles its point."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from nnx import NNCheckpoint


class _Died(BaseException):
    """Stands in for a SIGKILL at a chosen point of a save."""


def _save_dying_after(monkeypatch: pytest.MonkeyPatch, path: Path, epoch: int,
                      dies_after: Callable[[str], bool] | None) -> None:
    """Save a resume point for ``path``; the writer dies once a file ``dies_after``
    accepts has landed (None: it completes)."""
    import nnx._persistence.resume_point as resume_point

    write = resume_point.atomic_write_bytes

    def landing(target: Any, data: bytes, **kwargs: Any) -> Path:
        out = write(target, data, **kwargs)
        if dies_after is not None and dies_after(Path(target).name):
            raise _Died
        return out

    monkeypatch.setattr(resume_point, "atomic_write_bytes", landing)
    checkpoint = NNCheckpoint(tag="last", epoch=epoch, run_id=path.parent.parent.name,
                              state_dict={"w": torch.full((3,), float(epoch))}, model={},
                              train={})
    try:
        checkpoint.save(path, training_state={"epoch": epoch},
                        position={"completed_epoch": epoch})
    except _Died:
        pass
    finally:
        monkeypatch.setattr(resume_point, "atomic_write_bytes", write)


def test_the_save_after_a_writer_died_in_the_publish_window_settles_its_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = "c" * 32
    path = tmp_path / run_id / "checkpoints" / "last.pt"
    _save_dying_after(monkeypatch, path, 0, None)
    # Epoch 1's writer dies with last.pt published and its manifest still staged.
    _save_dying_after(monkeypatch, path, 1, lambda name: name == "last.pt")
    point = NNCheckpoint.verify(run_id, "last", root=tmp_path)
    assert point is not None and point.staged and point.position["completed_epoch"] == 1
    # Epoch 2's writer makes that point live first, so dying right after its own sidecar
    # landed (it would have reused generation 2 and overwritten the staged point's
    # sidecar) still leaves epoch 1's point whole.
    _save_dying_after(monkeypatch, path, 2,
                      lambda name: name.startswith("last.pt.opt.") and name != "last.pt.opt.pt")
    point = NNCheckpoint.verify(run_id, "last", root=tmp_path)
    assert point is not None and not point.staged
    assert (point.generation, point.position["completed_epoch"]) == (2, 1)
    assert NNCheckpoint.load(run_id, "last", root=tmp_path).training_state() == {
        "epoch": 1, "generation": 2, "checkpoint_id": point.checkpoint_id}
    # A staged manifest whose checkpoint never landed is dropped by the next save.
    _save_dying_after(monkeypatch, path, 3, lambda name: name.endswith(".staged"))
    point = NNCheckpoint.verify(run_id, "last", root=tmp_path)
    assert point is not None and point.generation == 2
    _save_dying_after(monkeypatch, path, 4, None)
    point = NNCheckpoint.verify(run_id, "last", root=tmp_path)
    assert point is not None and (point.generation, point.position["completed_epoch"]) == (3, 4)
    assert not path.with_name("last.pt.manifest.json.staged").exists()
