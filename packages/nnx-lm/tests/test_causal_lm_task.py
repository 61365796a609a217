"""CausalLMTask: alignment, masks, the token_ce objective and the evaluation (spec §15)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from nnx import Devices, MonitorSpec, Nets, NNModel, NNModelParams
from nnx.extend import Component, Task
from nnx.lm import NNTransformerParams
from nnx.lm_tasks import CausalLMModel, CausalLMTask
from nnx.testing import sgd, tiny_train_params

VOCAB = 23
PAD = 0
TRAIN_LOSS = MonitorSpec(metric="loss", split="train")  # records the epoch's train_summary
SHAPE = NNTransformerParams(vocab_size=VOCAB, d_model=16, n_heads=2, n_layers=1, max_seq_len=16)


def lm_model(seed: int = 0, **task: Any) -> NNModel:
    torch.manual_seed(seed)
    return CausalLMModel(SHAPE, NNModelParams(net=Nets.TRANSFORMER, device=Devices.CPU),
                         task=CausalLMTask(vocab_size=VOCAB, **task))


def token_rows(n: int = 8, seq: int = 9, seed: int = 1) -> torch.Tensor:
    """``n`` rows of ``seq`` ids in [1, VOCAB): 0 is kept free as the padding id."""
    return torch.randint(1, VOCAB, (n, seq), generator=torch.Generator().manual_seed(seed))


def batched(rows: torch.Tensor, size: int) -> list[torch.Tensor]:
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def right_padded(rows: torch.Tensor, size: int, extra: int = 3) -> list[dict[str, torch.Tensor]]:
    """The same rows, each batch right-padded by ``extra`` pad tokens and masked."""
    out = []
    for chunk in batched(rows, size):
        pad = torch.full((len(chunk), extra), PAD, dtype=chunk.dtype)
        mask = torch.cat((torch.ones_like(chunk), torch.zeros_like(pad)), 1)
        out.append({"input_ids": torch.cat((chunk, pad), 1), "attention_mask": mask})
    return out


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def test_the_task_is_a_core_task_and_a_component() -> None:
    task = CausalLMTask(vocab_size=VOCAB)
    assert isinstance(task, Task) and isinstance(task, Component)
    assert task.component_spec().name == "lm.causal_task"
    assert task.component_state() == {"vocab_size": VOCAB, "pad_id": None, "ignore_id": -100,
                                      "alignment": "shift_inputs", "label_smoothing": 0.0}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"vocab_size": 0}, "vocab_size"),
    ({"vocab_size": 5, "alignment": "left"}, "alignment"),
    ({"vocab_size": 5, "label_smoothing": 1.0}, "label_smoothing"),
    ({"vocab_size": 5, "label_smoothing": float("nan")}, "label_smoothing"),
    ({"vocab_size": 5, "pad_id": 5}, "pad_id"),
    ({"vocab_size": 5, "ignore_id": 3}, "ignore_id"),
    ({"vocab_size": 5, "ignore_id": True}, "ignore_id"),
])
def test_bad_configurations_are_refused_naming_the_field(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CausalLMTask(**kwargs)


def test_shift_inputs_and_pre_shifted_align_the_same_targets() -> None:
    rows = token_rows(2)
    shifted = CausalLMTask(vocab_size=VOCAB).split(rows)
    pre = CausalLMTask(vocab_size=VOCAB, alignment="pre_shifted").split(
        (rows[:, :-1], rows[:, 1:]))
    assert torch.equal(shifted.inputs, pre.inputs) and torch.equal(shifted.targets, pre.targets)
    assert bool(shifted.valid.all())
    with pytest.raises(ValueError, match="pre_shifted"):
        CausalLMTask(vocab_size=VOCAB).split((rows[:, :-1], rows[:, 1:]))
    with pytest.raises(ValueError, match="carrying their targets"):
        CausalLMTask(vocab_size=VOCAB, alignment="pre_shifted").split(rows)


def test_ignore_pad_and_loss_masks_drop_their_positions() -> None:
    rows = token_rows(1, 6)
    rows[0, 2] = PAD
    loss_mask = torch.tensor([[1, 1, 1, 1, 0, 1]])
    lm = CausalLMTask(vocab_size=VOCAB, pad_id=PAD).split((rows, None, loss_mask))
    # target t is row[t + 1]: the pad at 2 drops target 1, the loss mask at 4 target 3
    assert lm.valid.tolist() == [[True, False, True, False, True]]
    targets = rows[:, 1:].clone()
    targets[0, 0] = -100
    pre = CausalLMTask(vocab_size=VOCAB, alignment="pre_shifted").split((rows[:, :-1], targets))
    assert pre.valid.tolist() == [[False, True, True, True, True]]


def test_left_padding_is_refused_before_anything_is_written(tmp_path) -> None:
    model = lm_model(pad_id=PAD)
    rows = token_rows(4)
    mask = torch.ones_like(rows)
    mask[1, :2] = 0  # padding before real tokens
    before = weights(model)
    batches = [{"input_ids": rows[:2], "attention_mask": torch.ones_like(rows[:2])},
               {"input_ids": rows[2:], "attention_mask": mask[2:]},
               {"input_ids": rows, "attention_mask": mask}]
    with pytest.raises(ValueError, match=r"left padding in rows \[1\]"):
        model.train(tiny_train_params(batches), root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())


def test_out_of_vocabulary_targets_are_refused() -> None:
    rows = token_rows(1)
    rows[0, 3] = VOCAB
    with pytest.raises(ValueError, match=r"token ids in \[0, 23\)"):
        CausalLMTask(vocab_size=VOCAB).split(rows)


def test_token_ce_with_label_smoothing_matches_torch() -> None:
    task = CausalLMTask(vocab_size=VOCAB, label_smoothing=0.1, alignment="pre_shifted")
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 5, VOCAB, generator=g, dtype=torch.float64)
    targets = torch.randint(0, VOCAB, (3, 5), generator=g)
    targets[0, :2] = -100
    lm = task.split((targets.clone(), targets))
    total, count = task.token_ce(logits, lm)
    expected = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100,
                               label_smoothing=0.1)
    assert count == 13
    assert torch.allclose(total / count, expected, rtol=1e-12, atol=0)
    plain, _ = task.token_ce(logits, lm, smoothing=0.0)
    assert not torch.allclose(plain, total)


def test_perplexity_is_exp_nll_and_accuracy_counts_tokens() -> None:
    model = lm_model()
    record = model.task.evaluate(model, batched(token_rows(), 3))
    assert record.status == "ok" and record.count == 8 * 8 and record.kind == "causal_lm"
    assert record.loss == record.metrics["nll"]
    assert record.metrics["perplexity"] == pytest.approx(math.exp(record.metrics["nll"]),
                                                         rel=1e-12)
    assert 0.0 <= record.metrics["token_accuracy"] <= 1.0


def test_eval_nll_is_the_same_under_batch_sizes_and_right_padding() -> None:
    model = lm_model()
    rows = token_rows()
    records = [model.task.evaluate(model, loader) for loader in (
        batched(rows, 8), batched(rows, 3), batched(rows, 1), right_padded(rows, 3))]
    for record in records[1:]:
        assert record.count == records[0].count
        assert record.loss == pytest.approx(records[0].loss, rel=1e-6)
        assert record.metrics["token_accuracy"] == records[0].metrics["token_accuracy"]


def test_an_all_masked_validation_is_empty_not_zero() -> None:
    rows = token_rows(2)
    model = lm_model()
    record = model.task.evaluate(model, [(rows, None, torch.zeros_like(rows))])
    assert record.status == "empty" and record.count == 0 and record.loss is None


def _epoch_loss(run) -> float:  # the engine's Σ CE / Σ #valid over the first epoch
    return run.epoch_records()[0].train_summary.loss


def test_training_normalizes_by_valid_tokens_across_batching_and_padding(tmp_path) -> None:
    # One update over the same tokens, as 1 batch, 4 accumulated microbatches, or
    # right-padded microbatches: the engine's Σ CE / Σ #valid is the same update.
    rows = token_rows()
    runs = []
    for i, (loader, accumulate) in enumerate([
            (batched(rows, 8), 1), (batched(rows, 2), 4), (right_padded(rows, 3), 3)]):
        model = lm_model(pad_id=PAD)
        params = tiny_train_params(loader, optim=sgd(0.5, accumulate), monitor=TRAIN_LOSS)
        run = model.train(params, root=tmp_path / str(i), verbose=False)
        runs.append((weights(model), _epoch_loss(run)))
    for state, loss in runs[1:]:
        assert loss == pytest.approx(runs[0][1], rel=1e-6)
        assert all(torch.allclose(runs[0][0][k], v, atol=1e-6) for k, v in state.items())


def test_an_all_masked_window_steps_nothing(tmp_path) -> None:
    model = lm_model()
    rows = token_rows(4)
    before = weights(model)
    masked = [(rows[:2], None, torch.zeros_like(rows[:2])), (rows[2:], None,
                                                              torch.zeros_like(rows[2:]))]
    run = model.train(tiny_train_params(masked), root=tmp_path / "runs", verbose=False)
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())
    assert all(idp.update_count == 0 for idp in run.idps)


def test_label_smoothing_changes_the_training_loss_not_the_evaluated_nll(tmp_path) -> None:
    rows = token_rows()
    losses, evals = [], []
    for eps in (0.0, 0.2):
        model = lm_model(label_smoothing=eps)
        before = model.task.evaluate(model, [rows[:4]])  # the first batch: the first record
        run = model.train(tiny_train_params(batched(rows, 4), optim=sgd(1e-12)),
                          root=tmp_path / str(eps), verbose=False)
        losses.append(run.idps[0].train_edp.loss)
        evals.append(before.loss)
    assert abs(losses[0] - losses[1]) > 1e-4
    assert evals[0] == evals[1]  # same seeded weights: the evaluation is unsmoothed
    assert losses[0] == pytest.approx(evals[0], rel=1e-6)  # unsmoothed, the loss is the NLL


def test_default_paths_are_refused_with_a_pointer_to_the_task() -> None:
    model = lm_model()
    with pytest.raises(ValueError, match="evaluated by its task"):
        model.evaluate(batched(token_rows(), 4))
    with pytest.raises(ValueError, match="default predict path"):
        model.predict(token_rows(2))
