"""A checkpoint written before the resume schema moved into one module still resumes bit
for bit (issue 37, spec §14).

``tests/data/training-state-3bce0d2/`` holds two runs written by nnx-core at commit
3bce0d2 (its ``regenerate.py`` says how), the counters in the old layout: an NNModel run,
2 of 4 planned epochs with a plateau schedule and EarlyStopping, and a Trainer run of 2
epochs (named optimizers G and D). A stateful resume of each must end where the
uninterrupted 4-epoch run ends. If a test here fails, such runs became
unresumable: fix the code, never the data.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest
import torch

from nnx import NNCheckpoint, NNRun, Trainer

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "training-state-3bce0d2"
RUN_ID = "3e409157c70a5f38eef9ddb206fef870"
GAN_ID = "527d4f69f66e24d63d1cb5cdb3ca9523"


def _recipe() -> ModuleType:
    """The fixture's own configuration (its regenerate.py): one definition of the run."""
    spec = importlib.util.spec_from_file_location("training_state_3bce0d2",
                                                  SHIPPED / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECIPE = _recipe()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A private copy: nothing here ever writes into the shipped files."""
    copy = tmp_path / "runs"
    for run_id in (RUN_ID, GAN_ID):
        shutil.copytree(SHIPPED / run_id, copy / run_id)
    return copy


def records(run: NNRun) -> list[tuple[object, ...]]:
    return [(i.epoch, i.iter_idx, i.update_count, i.lr, i.train_edp.loss,
             None if i.val_edp is None else i.val_edp.loss) for i in run.idps]


def continues(cut: NNRun, straight: NNRun, rest: NNRun, straight_net: torch.nn.Module,
              resumed_net: torch.nn.Module) -> None:
    """``rest``, resumed from the shipped ``cut``, ends where ``straight`` ends: bit for
    bit where this CPU wrote the same first epochs as the one that wrote the data."""
    same_kernels = records(straight)[:len(cut.idps)] == records(cut)
    for key, value in straight_net.state_dict().items():
        if same_kernels:
            assert torch.equal(value, resumed_net.state_dict()[key]), key
        else:  # another CPU's kernels round the shipped epochs differently by an ulp
            torch.testing.assert_close(resumed_net.state_dict()[key], value, rtol=0, atol=1e-6)
    if same_kernels:
        assert records(rest) == [r for r in records(straight) if r[0] >= 2]


def test_the_shipped_run_is_todays_configuration(root, tmp_path):
    cut = RECIPE.model().train(RECIPE.plan(), callbacks=RECIPE.callbacks(RECIPE.StopAfter(1)),
                               verbose=False, root=tmp_path)
    assert cut.id == RUN_ID  # the run id is pinned: the configuration did not drift
    gan = Trainer(RECIPE.gan_model()).train(RECIPE.gan_builder(2).build(),
                                            trainer_step_fn=RECIPE.GanStep(), verbose=False,
                                            root=tmp_path)
    assert gan.id == GAN_ID
    shipped = NNCheckpoint.load_training_state(RUN_ID, "last", root=root)
    # The old layout: the counters at the top level and in the update engine's component.
    assert shipped["committed_updates"] == shipped["loop"]["iter_idx"] == 6
    assert shipped["components"]["nnx.update_engine"]["state"]["committed_updates"] == 6


def test_a_stateful_resume_of_it_continues_as_the_straight_run(root, tmp_path):
    straight_model = RECIPE.model()
    stop = RECIPE.callbacks()
    straight = straight_model.train(RECIPE.plan(), callbacks=stop, verbose=False,
                                    root=tmp_path / "straight")
    resumed_model = RECIPE.model()
    again = RECIPE.callbacks()
    rest = resumed_model.train(
        RECIPE.plan(resume_from_run_id=RUN_ID, resume_mode="stateful",
                    resume_epochs="planned"),
        callbacks=again, verbose=False, root=root)

    assert [r.epoch for r in rest.epoch_records()] == [2, 3]
    status = rest.resume_status
    assert sorted(status.restored_components) == ["early_stopping", "nnx.update_engine"]
    assert rest.idps[0].iter_idx == 6 and rest.idps[0].update_count == 7  # counters continue
    assert (again[0].best, again[0].wait) == (stop[0].best, stop[0].wait)
    continues(NNRun.load(RUN_ID, root=root), straight, rest, straight_model.net,
              resumed_model.net)


def test_a_stateful_resume_of_the_trainer_run_continues_as_the_straight_run(root, tmp_path):
    shipped = NNCheckpoint.load_training_state(GAN_ID, "last", root=root)
    assert {name: s["updates"] for name, s in shipped["optimizers"].items()} == {
        "G": 8, "D": 8}  # the old layout: each optimizer's count in its own state
    straight_model = RECIPE.gan_model()
    straight = Trainer(straight_model).train(RECIPE.gan_builder(4).build(),
                                             trainer_step_fn=RECIPE.GanStep(), verbose=False,
                                             root=tmp_path / "straight")
    resumed_model = RECIPE.gan_model()
    params = RECIPE.gan_builder(2).resume_from(GAN_ID, checkpoint="last",
                                               mode="stateful").build()
    rest = Trainer(resumed_model).train(params, trainer_step_fn=RECIPE.GanStep(),
                                        verbose=False, root=root)

    assert [r.epoch for r in rest.epoch_records()] == [2, 3]
    assert rest.idps[0].iter_idx == 8 and rest.idps[0].update_count == 18
    saved = NNCheckpoint.load_training_state(rest.id, "last", root=root)
    assert saved["components"]["nnx.update_engine"]["state"]["optimizer_updates"] == {
        "G": 16, "D": 16}
    continues(NNRun.load(GAN_ID, root=root), straight, rest, straight_model.net,
              resumed_model.net)
