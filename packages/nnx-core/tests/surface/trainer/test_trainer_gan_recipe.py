"""The multi-optimizer Trainer (spec §8, §8.1–§8.4, with §2.5 clocks, §3.1 factories, §5).

Everything trains for real on tiny CPU models: a 1-D GAN (a generator G and a
critic D under one ``nn.Module``) for the step-function path, and the shared
tiny classifier for objective runs.
"""

from __future__ import annotations

import torch
from _support.trainer import (
    GanStep,
    gan_builder,
    gan_model,
    records,
    same_weights,
    weights,
)

from nnx import (
    NNCheckpoint,
    Trainer,
)


# == 1. the GAN recipe of §8 ===================================================================
def test_gan_recipe_steps_each_half_by_its_own_optimizer_and_resumes_bit_for_bit(tmp_path):
    step = GanStep()
    straight_model = gan_model()
    initial = weights(straight_model)
    straight = Trainer(straight_model).train(gan_builder(4).build(), trainer_step_fn=step,
                                             verbose=False, root=tmp_path / "straight")
    assert step.checked == 4 * 4  # every batch of every epoch checked both ownerships
    after = weights(straight_model)
    assert all(not torch.equal(initial[k], after[k]) for k in initial)  # G and D both trained
    assert [r.epoch for r in straight.epoch_records()] == [0, 1, 2, 3]
    assert straight.idps[-1].update_count == 4 * 4 * 2  # one D and one G update per batch

    first_model = gan_model()
    first = Trainer(first_model).train(gan_builder(2).build(), trainer_step_fn=GanStep(),
                                       verbose=False, root=tmp_path / "split")
    resumed_model = gan_model()
    params = gan_builder(2).resume_from(first.id, checkpoint="last", mode="auto").build()
    rest = Trainer(resumed_model).train(params, trainer_step_fn=GanStep(), verbose=False,
                                        root=tmp_path / "split")

    assert rest.id != first.id
    assert [r.epoch for r in rest.epoch_records()] == [2, 3]  # continues from the saved epoch
    status = rest.resume_status
    assert (status.mode, status.source_run, status.source_checkpoint, status.source_epoch) == (
        "stateful", first.id, "last", 1)
    assert same_weights(weights(resumed_model), after)  # K + (N - K) == N, bit for bit
    assert records(rest) == [r for r in records(straight) if r[0] >= 2]
    a = NNCheckpoint.load_training_state(straight.id, root=tmp_path / "straight")
    b = NNCheckpoint.load_training_state(rest.id, root=tmp_path / "split")
    assert a is not None and b is not None
    assert set(a["optimizers"]) == set(b["optimizers"]) == {"G", "D"}
    for name in ("G", "D"):
        sa, sb = a["optimizers"][name], b["optimizers"][name]
        assert sa["schedule"]["scheduler"] == sb["schedule"]["scheduler"]
        assert (a["components"]["nnx.update_engine"]["state"]["optimizer_updates"][name]
                == b["components"]["nnx.update_engine"]["state"]["optimizer_updates"][name]
                == 16)
        for pa, pb in zip(sa["optimizer"]["state"].values(), sb["optimizer"]["state"].values(),
                          strict=True):
            assert pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)
