"""CausalLMTask across a resume: the lm.causal_task component (spec §14.1, §15)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from nnx import Devices, Nets, NNModel, NNModelParams, NNOptimParams, NNRun, NNTrainParams
from nnx.lm import NNTransformerParams
from nnx.lm_tasks import CausalLMModel, CausalLMTask

VOCAB = 23
SHAPE = NNTransformerParams(vocab_size=VOCAB, d_model=16, n_heads=2, n_layers=1, max_seq_len=16,
                            attn_dropout=0.1, resid_dropout=0.1)  # dropout: RNG resumes too


def lm_model(seed: int = 0, **task: Any) -> NNModel:
    torch.manual_seed(seed)
    return CausalLMModel(SHAPE, NNModelParams(net=Nets.TRANSFORMER, device=Devices.CPU),
                         task=CausalLMTask(vocab_size=VOCAB, **task))


def loaders() -> tuple[Any, Any]:
    rows = torch.randint(0, VOCAB, (12, 9), generator=torch.Generator().manual_seed(1))
    train = torch.utils.data.DataLoader(rows[:8], batch_size=3, shuffle=True,
                                        generator=torch.Generator().manual_seed(2))
    return train, [rows[8:]]


def params(n_epochs: int, **fields: Any) -> NNTrainParams:
    train, val = loaders()
    optim = NNOptimParams.builder().adamw(max_lr=1e-2).accumulate_grad(2).build()
    return NNTrainParams(n_epochs=n_epochs, train_loader=train, val_loader=val, optim=optim,
                         scheduler=None, seed=0, **fields)


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def records(run: NNRun) -> list[dict[str, Any]]:
    return [idp.state() for idp in run.idps]


def test_a_two_plus_one_epoch_resume_equals_three_straight_epochs(tmp_path) -> None:
    straight = lm_model()
    full = straight.train(params(3), root=tmp_path / "a", verbose=False)
    first = lm_model()
    run = first.train(params(2), root=tmp_path / "b", verbose=False)
    resumed = lm_model(seed=5)  # other weights: the checkpoint must replace them
    again = resumed.train(params(1, resume_from_run_id=run.id), root=tmp_path / "b",
                          verbose=False)
    # The resumed run holds epoch 2; with the first run's epochs 0-1 it is the straight run.
    joined = records(NNRun.load(run.id, root=tmp_path / "b")) + records(
        NNRun.load(again.id, root=tmp_path / "b"))
    assert joined == records(NNRun.load(full.id, root=tmp_path / "a"))
    assert records(full)[-1]["val_edp"]["kind"] == "causal_lm"
    end, other = weights(straight), weights(resumed)
    assert all(torch.equal(end[k], other[k]) for k in end)


@pytest.mark.parametrize("change", [{"label_smoothing": 0.1}, {"pad_id": 0},
                                    {"ignore_id": -1}])
def test_a_resume_under_another_task_configuration_is_refused_first(tmp_path, change) -> None:
    run = lm_model().train(params(1), root=tmp_path, verbose=False)
    saved = records(NNRun.load(run.id, root=tmp_path))
    other = lm_model(seed=5, **change)
    before = weights(other)
    steps = []
    other.net.register_forward_hook(lambda *a: steps.append(1))
    with pytest.raises(Exception, match=r"lm\.causal_task: the run was trained with") as info:
        other.train(params(1, resume_from_run_id=run.id), root=tmp_path, verbose=False)
    assert type(info.value).__name__ == "ComponentRestoreError"
    assert steps == []  # refused before any forward, so before the first resumed update
    assert all(torch.equal(before[k], v) for k, v in weights(other).items())
    assert records(NNRun.load(run.id, root=tmp_path)) == saved


def test_the_task_configuration_is_part_of_the_run_id(tmp_path) -> None:
    """Task.identity(): two task configurations are two runs, never one reused id."""
    plain = lm_model().train(params(1), verbose=False, root=tmp_path)
    smoothed = lm_model(label_smoothing=0.1).train(params(1), verbose=False, root=tmp_path)
    assert plain.id != smoothed.id
    assert plain.state()["task"] == {"kind": "lm.causal_task", "vocab_size": VOCAB}
    assert smoothed.state()["task"] == {"kind": "lm.causal_task", "vocab_size": VOCAB,
                                        "label_smoothing": 0.1}
    assert NNRun.load(smoothed.id, root=tmp_path).id == smoothed.id


def bare_lm(seed: int = 0) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(SHAPE, NNModelParams(net=Nets.TRANSFORMER, device=Devices.CPU))


def test_the_task_objective_carries_the_task_across_a_resume(tmp_path) -> None:
    """issue 26 item 6: objective=task.objective() on a task-less NNModel records the task
    (run id and lm.causal_task component), so another configuration is refused first."""
    first = CausalLMTask(vocab_size=VOCAB)
    run = bare_lm().train(params(1), objective=first.objective(),
                          eval_step_fn=first.eval_step(), root=tmp_path, verbose=False)
    assert run.state()["task"] == {"kind": "lm.causal_task", "vocab_size": VOCAB}
    saved = records(NNRun.load(run.id, root=tmp_path))
    other_task = CausalLMTask(vocab_size=VOCAB, label_smoothing=0.1)
    other = bare_lm(seed=5)
    before = weights(other)
    steps = []
    other.net.register_forward_hook(lambda *a: steps.append(1))
    with pytest.raises(Exception, match=r"lm\.causal_task: the run was trained with "
                                         r"label_smoothing=0\.0") as info:
        other.train(params(1, resume_from_run_id=run.id), objective=other_task.objective(),
                    eval_step_fn=other_task.eval_step(), root=tmp_path, verbose=False)
    assert type(info.value).__name__ == "ComponentRestoreError"
    assert steps == [] and all(torch.equal(before[k], v) for k, v in weights(other).items())
    assert records(NNRun.load(run.id, root=tmp_path)) == saved
    same = CausalLMTask(vocab_size=VOCAB)
    again = bare_lm(seed=5).train(params(1, resume_from_run_id=run.id),
                                  objective=same.objective(), eval_step_fn=same.eval_step(),
                                  root=tmp_path, verbose=False)
    assert len(again.epoch_records()) == 1 and again.state()["task"] == run.state()["task"]


def test_the_component_name_prefixes_a_refusal_once(tmp_path) -> None:
    """issue 26 item 8: "lm.causal_task: lm.causal_task:" was printed twice."""
    run = lm_model().train(params(1), root=tmp_path, verbose=False)
    with pytest.raises(Exception) as info:
        lm_model(label_smoothing=0.1).train(params(1, resume_from_run_id=run.id),
                                            root=tmp_path, verbose=False)
    message = str(info.value)
    assert message.count("lm.causal_task:") == 1, message
    assert "  - lm.causal_task: the run was trained with label_smoothing=0.0, this task has " \
           "label_smoothing=0.1" in message
