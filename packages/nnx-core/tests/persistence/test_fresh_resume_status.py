"""A fresh run reports ``resume_status.mode == "fresh"`` (spec §14.2; issue 26 item 14),
in memory and after NNRun.load. What a resumed run reports (mode, source run, epoch,
generation) is engine/test_resume.py's."""

from __future__ import annotations

import yaml

from nnx import NNRun, ResumeStatus
from nnx.testing import tiny_batches, tiny_model, tiny_train_params


def test_a_fresh_run_reports_mode_fresh_in_memory_and_after_load(tmp_path):
    run = tiny_model().train(tiny_train_params(tiny_batches(2)), verbose=False, root=tmp_path)
    for status in (run.resume_status, NNRun.load(run.id, root=tmp_path).resume_status):
        assert isinstance(status, ResumeStatus)
        assert status == ResumeStatus(mode="fresh")
        assert (status.source_run, status.source_epoch) == (None, None)
    # nothing was restored, so nothing is written: metadata.yaml has no resume block
    meta = yaml.safe_load((run.path / "metadata.yaml").read_text()) or {}
    assert "resume" not in meta


def test_a_new_run_object_is_fresh_before_it_trains():
    model = tiny_model()
    run = NNRun(model_params=model.params, net_params=model.net_params,
                train_params=tiny_train_params(tiny_batches(2)))
    assert run.resume_status.mode == "fresh"
