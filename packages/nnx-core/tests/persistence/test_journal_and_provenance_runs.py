"""The history journal and provenance, wired into NNModel.train (spec §4.4, §4.5)."""

from __future__ import annotations

import tracemalloc

import pytest
import torch

from nnx import Callback, NNModel, NNParams, NNRun, NNTrainParams
from nnx.history import HistoryJournal, export_history_csv, iter_history
from nnx.provenance import ExperimentManifest, compare, declared


def batches(n: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(6, 3, generator=g), torch.randint(0, 2, (6,), generator=g))
            for _ in range(n)]


def model() -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(4,)))


def params(n_epochs: int = 6, **kw) -> NNTrainParams:
    data = batches()
    return NNTrainParams(n_epochs=n_epochs, train_loader=data, val_loader=data, seed=0, **kw)


class Seen(Callback):
    def __init__(self, access: str = "window") -> None:
        self.history_access = access
        self.lengths: list[int] = []

    def on_epoch_end(self, ctx):
        self.lengths.append(len(ctx.idps))
        with pytest.raises(TypeError):
            ctx.idps[0] = ctx.idps[0]  # read-only in both modes


def test_a_journal_run_keeps_a_bounded_window_and_the_full_history_on_disk(tmp_path):
    window, full = Seen(), Seen("full")
    run = model().train(params(), history=HistoryJournal(retention=5, chunk_size=2),
                        callbacks=[window, full], verbose=False, root=tmp_path / "j")
    assert len(run.idps) <= 5 and max(window.lengths) <= 5
    assert full.lengths == [4 * (e + 1) for e in range(6)]  # every record, per epoch
    path = tmp_path / "j" / run.id
    assert not (path / "idps.csv").exists() and (path / "history" / "journal.json").is_file()
    loaded = NNRun.load(run.id, root=tmp_path / "j")
    assert len(loaded.idps) == 5 and [r.epoch for r in loaded.epoch_records()] == list(range(6))
    assert len(list(iter_history(path))) == 24
    # The same configuration trained eagerly writes the same history, column for column.
    eager = model().train(params(), verbose=False, root=tmp_path / "e")
    assert eager.id == run.id  # the journal is never part of the run id
    export_history_csv(path, tmp_path / "exported.csv")
    assert (tmp_path / "exported.csv").read_text() == (
        tmp_path / "e" / eager.id / "idps.csv").read_text()


def test_callbacks_a_journal_cannot_serve_are_refused_before_any_run(tmp_path):
    journal = HistoryJournal(retention=4)
    with pytest.raises(ValueError, match="plain function"):
        model().train(params(), history=journal, callbacks=[lambda idps: None],
                      verbose=False, root=tmp_path)
    with pytest.raises(ValueError, match="history_access must be 'window' or 'full'"):
        model().train(params(), history=journal, callbacks=[Seen("everything")],
                      verbose=False, root=tmp_path)
    assert not tmp_path.joinpath("runs").exists() and list(tmp_path.iterdir()) == []


def _peak(epochs: int, root) -> int:
    tracemalloc.start()
    model().train(params(epochs), history=HistoryJournal(retention=20), verbose=False,
                  root=root, salt=f"e{epochs}")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


@pytest.mark.slow
def test_peak_memory_stays_flat_as_epochs_grow(tmp_path):
    short, long = _peak(25, tmp_path), _peak(100, tmp_path)
    # Four times the epochs and records: the Python heap peak does not follow.
    assert long < short * 1.5, (short, long)


def test_provenance_records_the_plan_and_its_attempts(tmp_path):
    m, p = model(), params(3)
    plan = ExperimentManifest.for_model(m, train=p, data={"train": declared("toy-v1")})
    run = m.train(p, provenance=plan, verbose=False, root=tmp_path)
    prov = run.provenance
    assert prov.fingerprint == plan.fingerprint
    assert prov.attempt.status == "completed" and prov.attempt.last_epoch == 2
    assert prov.attempt.last_tag == "last"
    # A resume of the same plan keeps the fingerprint and links its parent attempt.
    rest_params = params(2, resume_from_run_id=run.id)
    rest_plan = ExperimentManifest.for_model(m, train=rest_params,
                                             data={"train": declared("toy-v1")})
    assert rest_plan.fingerprint == plan.fingerprint
    rest = model().train(rest_params, provenance=rest_plan, verbose=False, root=tmp_path)
    assert rest.provenance.attempt.parent["attempt_id"] == prov.attempt.attempt_id
    # ... and the epoch it resumed at, as a bundle's link does (nnx.comparison's lineage).
    assert rest.provenance.attempt.parent["epoch"] == 2
    assert compare(run, rest).fields.get("$") != "absent"


def test_a_failed_fit_records_a_failed_attempt(tmp_path):
    from nnx import default_train_step

    m = model()

    def broken(ctx):
        if ctx.epoch == 1:  # after epoch 0 committed: the run directory stays (§4.4)
            raise RuntimeError("diverged")
        return default_train_step(ctx)

    with pytest.raises(RuntimeError, match="diverged"):
        m.train(params(2), train_step_fn=broken, verbose=False, root=tmp_path,
                provenance=ExperimentManifest.for_model(m))
    run_dir = next(p for p in tmp_path.iterdir() if not p.name.startswith("."))
    from nnx.provenance import read_provenance

    attempt = read_provenance(run_dir).attempt
    assert attempt.status == "failed" and attempt.error_message == "diverged"
    assert (attempt.last_tag, attempt.last_epoch) == ("last", 0)


def test_a_fit_failing_before_its_first_commit_leaves_no_attempt_behind(tmp_path):
    m = model()

    def broken(ctx):
        raise RuntimeError("diverged")

    plan = ExperimentManifest.for_model(m)
    with pytest.raises(RuntimeError, match="diverged"):
        m.train(params(2), train_step_fn=broken, verbose=False, root=tmp_path, provenance=plan)
    # Nothing was committed: the reservation (run.yaml, provenance, attempt) is released.
    assert [p for p in tmp_path.iterdir() if not p.name.startswith(".")] == []
    run = model().train(params(2), verbose=False, root=tmp_path, provenance=plan)
    assert run.provenance.attempt.status == "completed"
