"""Nothing on a bundle's read path unpickles (spec §22): inspect, validate, reconstruct
and resume all run with pickle.load / loads / Unpickler and torch.load made to raise,
even beside a legacy last.pt and with the source run's pickled checkpoints present."""

from __future__ import annotations

import pickle
import shutil

import pytest
import torch
from _support.bundles import params, train

from nnx import EarlyStopping, NNCheckpoint
from nnx.bundles import export_bundle, inspect_bundle, reconstruct_bundle, validate_bundle


class Unpickled(AssertionError):
    pass


def _refuse(*args, **kwargs):
    raise Unpickled("the bundle read path unpickled something")


class _RefusingUnpickler:
    def __init__(self, *args, **kwargs):
        _refuse()


def test_the_read_path_never_unpickles(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    run = train(root)
    export_bundle(run.id, tmp_path / "shared" / "bundle", root=root)
    # A legacy pickle checkpoint right beside the bundle, as a careless copy leaves it.
    shutil.copyfile(root / run.id / "checkpoints" / "last.pt", tmp_path / "shared" / "last.pt")
    expected = NNCheckpoint.load(run.id, "last", root=root).state_dict
    monkeypatch.setattr(pickle, "load", _refuse)
    monkeypatch.setattr(pickle, "loads", _refuse)
    monkeypatch.setattr(pickle, "Unpickler", _RefusingUnpickler)
    monkeypatch.setattr(torch, "load", _refuse)
    bundle = tmp_path / "shared" / "bundle"
    assert inspect_bundle(bundle).source_run == run.id
    validate_bundle(bundle)
    rebuilt = reconstruct_bundle(bundle, components=[EarlyStopping(patience=5)])
    assert all(torch.equal(v, expected[k]) for k, v in rebuilt.model.net.state_dict().items())
    # The source run (its pickles included) sits under the same root the resume writes to.
    resumed = rebuilt.resume(params(1), callbacks=[EarlyStopping(patience=5)], verbose=False,
                             root=root)
    assert resumed.resume_status.mode == "stateful"
    # The patch is live: a pickle reader would have failed.
    with pytest.raises(Exception, match="unpickled something"):
        NNCheckpoint.load(run.id, "last", root=root)
