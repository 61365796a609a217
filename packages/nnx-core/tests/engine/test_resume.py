"""Resuming from a checkpoint (spec §14, §14.1–§14.3): bit-exact, checked before it starts."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from nnx import (
    Callback,
    EarlyStopping,
    NNCheckpoint,
    NNDataset,
    NNModel,
    NNOptimParams,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
)
from nnx.components import ComponentRestoreError, ComponentSpec, discover_components


def dataset() -> NNDataset:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(96, 5, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    return NNDataset(x, y, val_proportion=0.25, batch_sizes=(16, None, None), seed=7)


def model() -> NNModel:
    torch.manual_seed(11)  # the weights are replaced on resume; this only fixes the start
    return NNModel(net_params=NNParams(input_dim=5, output_dim=3, hidden_dims=(16, 16),
                                       dropout_prob=0.2))


def plan(**changes) -> NNTrainParams:
    data = dataset()  # fresh loaders: their generators start from their seed
    base = dict(n_epochs=4, train_loader=data.train_loader, val_loader=data.val_loader,
                optim=NNOptimParams.builder().adam(max_lr=3e-2).build(),
                scheduler=NNSchedulerParams.builder().reduce_on_plateau(
                    factor=0.5, patience=0, threshold=1e-3).build(), seed=0)
    base.update(changes)
    return NNTrainParams(**base)


class StopAfter(Callback):
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_epoch_end(self, ctx):
        if ctx.epoch == self.epoch:
            ctx.should_stop = True


def records(run):
    return [(i.epoch, i.iter_idx, i.update_count, i.lr, i.train_edp.loss,
             None if i.val_edp is None else i.val_edp.loss) for i in run.idps]


def test_a_split_run_continues_bit_for_bit(tmp_path):
    straight_stop = EarlyStopping(monitor="val_edp.loss", patience=10)
    full = model()
    straight = full.train(plan(), callbacks=[straight_stop], verbose=False,
                          root=tmp_path / "a")

    first_model = model()
    first = first_model.train(plan(), callbacks=[EarlyStopping(monitor="val_edp.loss",
                                                               patience=10), StopAfter(1)],
                              verbose=False, root=tmp_path / "b")
    assert [r.epoch for r in first.epoch_records()] == [0, 1]

    resumed_stop = EarlyStopping(monitor="val_edp.loss", patience=10)
    second_model = model()
    rest = second_model.train(
        plan(resume_from_run_id=first.id, resume_mode="stateful", resume_epochs="planned"),
        callbacks=[resumed_stop], verbose=False, root=tmp_path / "b")

    assert rest.id != first.id  # the child hashes its parent
    for key, value in full.net.state_dict().items():
        assert torch.equal(value, second_model.net.state_dict()[key]), key
    assert records(rest) == [r for r in records(straight) if r[0] >= 2]
    a = torch.load(straight.checkpoints_dir / "last.pt.opt.pt", weights_only=False)
    b = torch.load(rest.checkpoints_dir / "last.pt.opt.pt", weights_only=False)
    assert a["schedule"]["scheduler"] == b["schedule"]["scheduler"]
    for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values(),
                      strict=True):
        assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert (resumed_stop.best, resumed_stop.wait) == (straight_stop.best, straight_stop.wait)
    status = NNRun.load(rest.id, root=tmp_path / "b").resume_status
    assert (status.mode, status.source_run, status.source_epoch) == ("stateful", first.id, 1)
    source = NNCheckpoint.resume_point(first.id, "last", root=tmp_path / "b")
    assert (status.source_generation, status.source_checkpoint_id) == (
        source.generation, source.checkpoint_id)
    assert "early_stopping" in status.restored_components
    state = NNRun.load(rest.id, root=tmp_path / "b").state()["train"]
    assert state["parent_run_id"] == first.id and state["resume_epochs"] == "planned"


def test_additional_epochs_and_weights_only(tmp_path):
    first = model().train(plan(n_epochs=2), verbose=False, root=tmp_path)
    more = model().train(plan(n_epochs=2, resume_from_run_id=first.id), verbose=False,
                         root=tmp_path)
    assert [r.epoch for r in more.epoch_records()] == [2, 3]
    assert more.resume_status.mode == "stateful"
    assert "nnx.update_engine" in more.resume_status.restored_components
    assert more.idps[0].iter_idx == len(first.idps)  # the counters continue
    warm = model().train(plan(n_epochs=1, resume_from_run_id=first.id,
                              resume_mode="weights_only"), verbose=False, root=tmp_path)
    assert warm.resume_status.mode == "weights_only"
    assert [r.epoch for r in warm.epoch_records()] == [2]
    assert "nnx.update_engine" in warm.resume_status.fresh_components
    assert warm.idps[0].iter_idx == 0 and warm.idps[0].update_count == 1  # start at zero


def test_refusals_happen_before_anything_is_reserved(tmp_path):
    first = model().train(plan(n_epochs=2), verbose=False, root=tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())

    def refused(exc, match, **changes):
        with pytest.raises(exc, match=match):
            model().train(plan(**changes), verbose=False, root=tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == before

    refused(ValueError, "needs a resume", resume_epochs="planned")
    refused(FileNotFoundError, "no 'q3' checkpoint", resume_from_run_id=first.id,
            resume_from_checkpoint="q3")
    refused(ValueError, "source planned 2 epochs, this run 4", resume_from_run_id=first.id,
            resume_epochs="planned")
    refused(ValueError, "already finished its plan", n_epochs=2, resume_from_run_id=first.id,
            resume_epochs="planned")
    refused(ComponentRestoreError, "optimizer: saved Adam, now SGD",
            resume_from_run_id=first.id, optim=NNOptimParams.builder().sgd(max_lr=0.1).build())
    refused(ComponentRestoreError, "schedule clock|plateau|schedule:",
            resume_from_run_id=first.id, scheduler=None)
    one_cycle = NNSchedulerParams.builder().one_cycle(max_lr=0.1).clock("optimizer_update")
    refused(ValueError, "explicit total_steps", resume_from_run_id=first.id,
            scheduler=one_cycle.build())
    with pytest.raises(ValueError, match="do not fit this net"):
        NNModel(net_params=NNParams(input_dim=5, output_dim=3, hidden_dims=(8,))).train(
            plan(resume_from_run_id=first.id), verbose=False, root=tmp_path)


def test_a_changed_early_stopping_monitor_is_reported_before_restoring(tmp_path):
    first = model().train(plan(n_epochs=2), callbacks=[EarlyStopping(monitor="val_edp.loss")],
                          verbose=False, root=tmp_path)
    with pytest.raises(ComponentRestoreError, match=r"saved monitoring 'val_edp\.loss'"):
        model().train(plan(resume_from_run_id=first.id),
                      callbacks=[EarlyStopping(monitor="val_edp.error")], verbose=False,
                      root=tmp_path)


def test_a_resume_from_a_run_that_does_not_exist_leaves_no_lock_file(tmp_path):
    """Issue 36 item 22: the refusal used to leave runs/.leases/<source>.lock behind (the
    source's clean-up took its lease before anything looked for the run)."""
    first = model().train(plan(n_epochs=1), verbose=False, root=tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(FileNotFoundError, match="no run nosuchrun under"):
        model().train(plan(resume_from_run_id="nosuchrun"), verbose=False, root=tmp_path)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert first.id != "nosuchrun"


def test_weights_only_checkpoint_needs_a_weights_only_or_auto_resume(tmp_path):
    from nnx import ModelCheckpoint

    first = model().train(plan(n_epochs=2), callbacks=[ModelCheckpoint(prefix="snap")],
                          verbose=False, root=tmp_path)
    with pytest.raises(ValueError, match="holds weights only"):
        model().train(plan(resume_from_run_id=first.id, resume_from_checkpoint="snap_e1",
                           resume_mode="stateful"), verbose=False, root=tmp_path)
    with pytest.warns(RuntimeWarning, match="holds weights only"):
        warm = model().train(plan(n_epochs=1, resume_from_run_id=first.id,
                                  resume_from_checkpoint="snap_e1"),
                             verbose=False, root=tmp_path)
    assert warm.resume_status.mode == "weights_only"


class Counter:
    def __init__(self, name="test.counter", required=True, numbered=False):
        self.spec = ComponentSpec(name, 1, required=required, numbered=numbered)
        self.count = 0

    def component_spec(self):
        return self.spec

    def component_state(self):
        return {"count": self.count}

    def load_component_state(self, state, *, version):
        if state["count"] < 0:
            raise RuntimeError("negative count")
        self.count = state["count"]


def test_component_discovery_numbering_and_refusals():
    a, b = Counter("x", numbered=True), Counter("x", numbered=True)
    found = discover_components([a, b, a])
    assert list(found) == ["x", "x.2"] and found["x.2"][1] is b
    with pytest.raises(ValueError, match="two components are named 'y'"):
        discover_components([Counter("y"), Counter("y")])
    with pytest.raises(TypeError, match=r"components\[0\]"):
        discover_components([], [object()])


def test_components_restore_transactionally(tmp_path):
    counter = Counter()
    counter.count = 3
    first = model().train(plan(n_epochs=1), components=[counter], verbose=False, root=tmp_path)
    # A required component missing on resume is reported with every other problem.
    with pytest.raises(ComponentRestoreError, match=r"'test\.counter'.*does not register"):
        model().train(plan(resume_from_run_id=first.id), verbose=False, root=tmp_path)
    counter.count = 5
    resumed_counter = Counter()
    rest = model().train(plan(n_epochs=1, resume_from_run_id=first.id),
                         components=[resumed_counter], verbose=False, root=tmp_path)
    assert resumed_counter.count == 3 and "test.counter" in rest.resume_status.restored_components
    assert dataclasses.is_dataclass(rest.resume_status)


def test_a_failing_load_rolls_back_components_model_and_rng(tmp_path):
    good, bad = Counter("a"), Counter("b")
    good.count, bad.count = 2, -1  # -1 makes load_component_state raise on resume
    first = model().train(plan(n_epochs=1), components=[good, bad], verbose=False,
                          root=tmp_path)
    fresh_good, fresh_bad = Counter("a"), Counter("b")
    victim = model()
    weights = {k: v.clone() for k, v in victim.net.state_dict().items()}
    with pytest.raises(RuntimeError, match="negative count"):
        victim.train(plan(resume_from_run_id=first.id), components=[fresh_good, fresh_bad],
                     verbose=False, root=tmp_path)
    assert fresh_good.count == 0 and fresh_bad.count == 0
    assert all(torch.equal(weights[k], v) for k, v in victim.net.state_dict().items())


class HalfLoader:
    """Assigns one field of its saved state, then refuses the rest (a partial load)."""

    def __init__(self) -> None:
        self.count, self.history = 0, [1.0]

    def component_spec(self):
        return ComponentSpec("test.half", 1)

    def component_state(self):
        return {"count": self.count, "history": self.history}

    def load_component_state(self, state, *, version):
        self.count = state["count"]
        self.history[:] = state["history"]  # in place: the snapshot must be a copy
        if self.count > 5:  # checked only after assigning: the load is half done
            raise ValueError("half-loaded: a count above 5 is from another schema")


def test_the_component_whose_load_raises_is_rolled_back_too(tmp_path):
    saver = HalfLoader()
    saver.count, saver.history = 7, [2.0, 3.0]
    first = model().train(plan(n_epochs=1), components=[saver], verbose=False, root=tmp_path)
    victim = HalfLoader()
    with pytest.raises(ValueError, match="half-loaded"):
        model().train(plan(resume_from_run_id=first.id), components=[victim], verbose=False,
                      root=tmp_path)
    assert victim.component_state() == {"count": 0, "history": [1.0]}


def run_dirs(root) -> list[str]:
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and p.name != "best")


def test_a_schedule_on_one_side_only_is_refused_naming_the_side_that_has_it(tmp_path):
    with_schedule = model().train(plan(n_epochs=1), verbose=False, root=tmp_path)
    without = model().train(plan(n_epochs=1, scheduler=None), verbose=False, root=tmp_path,
                            salt="none")
    before = run_dirs(tmp_path)
    with pytest.raises(ComponentRestoreError,
                       match=r"the checkpoint has a schedule \(REDUCE_LR_ON_PLATEAU\) and this "
                             r"run has none"):
        model().train(plan(n_epochs=1, scheduler=None, resume_from_run_id=with_schedule.id),
                      verbose=False, root=tmp_path)
    with pytest.raises(ComponentRestoreError,
                       match=r"the checkpoint has no schedule and this run has one "
                             r"\(REDUCE_LR_ON_PLATEAU\)"):
        model().train(plan(n_epochs=1, resume_from_run_id=without.id), verbose=False,
                      root=tmp_path)
    assert run_dirs(tmp_path) == before  # refused before any run was reserved


def worker_loader(num_workers: int) -> torch.utils.data.DataLoader:
    data = dataset().train_loader.dataset
    return torch.utils.data.DataLoader(data, batch_size=32, shuffle=True,
                                       generator=torch.Generator().manual_seed(5),
                                       num_workers=num_workers)


def test_a_stateful_resume_with_loader_workers_warns_and_one_without_does_not(tmp_path):
    first = model().train(plan(n_epochs=1, train_loader=worker_loader(0), scheduler=None),
                          verbose=False, root=tmp_path)
    with pytest.warns(RuntimeWarning, match=r"num_workers=1.*not checkpointed"):
        model().train(plan(n_epochs=1, train_loader=worker_loader(1), scheduler=None,
                           resume_from_run_id=first.id), verbose=False, root=tmp_path)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*num_workers", category=RuntimeWarning)
        model().train(plan(n_epochs=1, train_loader=worker_loader(0), scheduler=None,
                           resume_from_run_id=first.id), verbose=False,
                      root=tmp_path, salt="again")
    # A weights-only warm start restores no streams, so workers change nothing it promises.
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*num_workers", category=RuntimeWarning)
        model().train(plan(n_epochs=1, train_loader=worker_loader(1), scheduler=None,
                           resume_from_run_id=first.id, resume_mode="weights_only"),
                      verbose=False, root=tmp_path, salt="warm")


def test_an_update_clock_one_cycle_with_accumulation_also_continues_bit_for_bit(tmp_path):
    data_batches = len(dataset().train_loader)
    updates = 4 * -(-data_batches // 2)  # 4 epochs of ceil(batches / 2) windows
    schedule = (NNSchedulerParams.builder().one_cycle(max_lr=5e-2, total_steps=updates)
                .clock("optimizer_update").build())
    optim = NNOptimParams.builder().sgd(max_lr=5e-2, momentum=0.9).accumulate_grad(2).build()
    full = model()
    straight = full.train(plan(optim=optim, scheduler=schedule), verbose=False,
                          root=tmp_path / "a")
    first = model().train(plan(optim=optim, scheduler=schedule), callbacks=[StopAfter(1)],
                          verbose=False, root=tmp_path / "b")
    second = model()
    rest = second.train(plan(optim=optim, scheduler=schedule, resume_from_run_id=first.id,
                             resume_mode="stateful", resume_epochs="planned"),
                        verbose=False, root=tmp_path / "b")
    for key, value in full.net.state_dict().items():
        assert torch.equal(value, second.net.state_dict()[key]), key
    assert records(rest) == [r for r in records(straight) if r[0] >= 2]
    assert rest.idps[-1].update_count == updates  # the one horizon, exactly used up


def _tree(path):
    return {p.relative_to(path).as_posix(): p.read_bytes()
            for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_resume_source_outside_the_runs_root_is_refused_at_construction(tmp_path):
    """``resume_from_run_id`` is a run id like any other (§14.3 lineage): a path that
    leaves the runs root is refused when the params are built, before anything is read
    or written, so it can never be resumed from nor recorded as parent_run_id."""
    from nnx import NNTrainerParams

    root = tmp_path / "runs"
    source = model().train(plan(n_epochs=1), verbose=False, root=tmp_path / "other")
    (tmp_path / "other" / source.id).rename(tmp_path / "elsewhere")  # a run dir outside root
    outside = _tree(tmp_path / "elsewhere")
    for bad in ("../elsewhere", "..", ".", "a/b", "a\\b", f"{source.id}/../../elsewhere"):
        with pytest.raises(ValueError, match=r"NNTrainParams\.resume_from_run_id is not a "
                                             r"run id"):
            plan(resume_from_run_id=bad)
        with pytest.raises(ValueError, match=r"NNTrainerParams\.resume_from_run_id is not"):
            NNTrainerParams(optims={"main": NNOptimParams()}, resume_from_run_id=bad)
        with pytest.raises(ValueError, match=r"resume_from run_id is not a run id"):
            NNTrainerParams.builder().resume_from(bad)
        with pytest.raises(ValueError, match=r"NNTrainParams\.parent_run_id is not a run id"):
            NNTrainParams(parent_run_id=bad)
    with pytest.raises(ValueError, match=r"resume_from_checkpoint is not a checkpoint tag"):
        plan(resume_from_run_id="x", resume_from_checkpoint="../../../elsewhere/last")
    assert not root.exists()
    assert _tree(tmp_path / "elsewhere") == outside


def test_a_resume_source_inside_the_root_still_resumes(tmp_path):
    source = model().train(plan(n_epochs=1), verbose=False, root=tmp_path)
    child = model().train(plan(n_epochs=1, resume_from_run_id=source.id), verbose=False,
                          root=tmp_path)
    assert child.train_params.parent_run_id == source.id
