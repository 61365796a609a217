"""dpo_train_step_factory (spec §6.1, §15): the written-out loss, log 2 at policy ==
reference, a frozen reference, the reward metrics, the refusals."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("nnx.lm")

from _dpo_tiny import PAD, TRIPLES, V, plan, policy, row_log_prob, sgd

from nnx import Precision
from nnx._step_helpers import is_full_precision_only
from nnx.objectives.ownership import is_imperative_step
from nnx.paradigms import NNPreferenceDataset, dpo_train_step_factory
from nnx.paradigms.dpo import join_completion


def weights(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def loader(batch_size=4):
    return NNPreferenceDataset(TRIPLES, pad_id=PAD, vocab_size=V).loader(batch_size)


def hand_loss(pol, ref, beta, triples):
    rows = []
    for p, c, r in triples:
        pc, pr = row_log_prob(pol, p, c), row_log_prob(pol, p, r)
        with torch.no_grad():
            rc, rr = row_log_prob(ref, p, c), row_log_prob(ref, p, r)
        rows.append(-F.logsigmoid(beta * ((pc - rc) - (pr - rr))))
    return torch.stack(rows).mean()


def test_the_loss_equals_the_written_out_formula_and_one_update_matches_autograd(tmp_path):
    model, twin, reference = policy(0), policy(0), policy(1)
    step = dpo_train_step_factory(reference, beta=0.5, pad_id=PAD)
    run = model.train(plan(loader()), train_step_fn=step, root=tmp_path, verbose=False)
    expected = hand_loss(twin.net, reference.net, 0.5, TRIPLES)
    (idp,) = run.idps
    assert idp.train_edp.loss == pytest.approx(float(expected.detach()), abs=1e-6)
    twin.net.zero_grad()
    expected.backward()
    with torch.no_grad():
        for p in twin.net.parameters():
            p -= 0.1 * p.grad
    for name, p in twin.net.state_dict().items():  # 1e-6: padded vs unpadded float32 sums
        torch.testing.assert_close(model.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)
    assert idp.update_count == 1


def test_the_loss_is_log_2_when_the_policy_is_the_reference(tmp_path):
    model = policy(0)
    reference = copy.deepcopy(model)
    run = model.train(plan(loader(), optim=sgd(0.0)),
                      train_step_fn=dpo_train_step_factory(reference, pad_id=PAD),
                      root=tmp_path, verbose=False)
    edp = run.idps[0].train_edp
    assert edp.loss == float(-F.logsigmoid(torch.tensor(0.0)))  # bit for bit
    assert edp.loss == pytest.approx(math.log(2), abs=1e-7)
    assert edp.extra["reward_margin"] == 0.0 and edp.extra["reward_accuracy"] == 0.0
    assert edp.extra["chosen_reward"] == edp.extra["rejected_reward"] == 0.0


def test_the_reference_never_changes_and_the_rewards_are_recorded(tmp_path):
    model, reference = policy(0), policy(1)
    before = weights(reference.net)
    run = model.train(plan(loader(2), n_epochs=3, optim=sgd(0.5)),
                      train_step_fn=dpo_train_step_factory(reference, beta=0.2, pad_id=PAD),
                      root=tmp_path, verbose=False)
    assert same(weights(reference.net), before)
    assert all(not p.requires_grad for p in reference.net.parameters())
    assert not reference.net.training
    extra = run.idps[-1].train_edp.extra
    assert set(extra) >= {"chosen_reward", "rejected_reward", "reward_margin",
                          "reward_accuracy"}
    assert extra["reward_margin"] == pytest.approx(
        extra["chosen_reward"] - extra["rejected_reward"], abs=1e-6)
    assert 0.0 <= extra["reward_accuracy"] <= 1.0
    first, last = run.idps[0].train_edp.loss, run.idps[-1].train_edp.loss
    assert last < first  # the policy learns to prefer the chosen completions


def test_prompt_and_padding_are_masked_out_of_the_completion():
    prompt = torch.tensor([[1, 2, 0], [3, 0, 0]])
    completion = torch.tensor([[4, 0], [5, 6]])
    ids, mask = join_completion(prompt, completion, PAD, 5)
    assert ids.tolist() == [[1, 2, 4, 0, 0], [3, 5, 6, 0, 0]]
    assert mask.tolist() == [[False, False, True, False, False],
                             [False, True, True, False, False]]


def test_the_step_is_marked_full_precision_only_and_imperative():
    step = dpo_train_step_factory(policy(1), pad_id=PAD)
    assert is_full_precision_only(step) and is_imperative_step(step)


@pytest.mark.parametrize("policy_", [Precision.FP16, Precision.BF16])
def test_a_reduced_precision_run_refuses_the_step_before_any_run_dir(tmp_path, policy_):
    from nnx import Nets, NNModelParams
    from nnx.lm import GenerativeNNModel, NNTransformerParams

    torch.manual_seed(0)
    model = GenerativeNNModel(net_params=NNTransformerParams(
        vocab_size=V, d_model=16, n_heads=2, n_layers=1, max_seq_len=16),
        params=NNModelParams(net=Nets.TRANSFORMER, precision=policy_))
    reference = policy(1)
    before, ref_before = weights(model.net), weights(reference.net)
    with pytest.raises(ValueError, match=rf"full-precision-only.*{policy_.name}"):
        model.train(plan(loader()), train_step_fn=dpo_train_step_factory(reference, pad_id=PAD),
                    root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert same(weights(model.net), before) and same(weights(reference.net), ref_before)
    assert all(p.requires_grad for p in reference.net.parameters())
    assert all(p.requires_grad for p in reference.net.parameters())


def test_the_step_passed_as_objective_is_refused_before_anything_runs(tmp_path):
    model = policy(0)
    before = weights(model.net)
    with pytest.raises(TypeError, match="imperative step"):
        model.train(plan(loader()), objective=dpo_train_step_factory(policy(1), pad_id=PAD),
                    root=tmp_path / "runs", verbose=False)
    assert same(weights(model.net), before) and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("batch, match", [
    ((torch.tensor([[0, 1]]), torch.tensor([[2]]), torch.tensor([[3]])), ">= 1 token"),
    ((torch.tensor([[1, 0, 2]]), torch.tensor([[2]]), torch.tensor([[3]])), "right-pad"),
    ((torch.tensor([[1]]), torch.tensor([[2.0]]), torch.tensor([[3]])), "integer tensor"),
    ((torch.tensor([[1]]), torch.tensor([[2], [4]]), torch.tensor([[3]])), "1, 2 and 1 rows"),
    ((torch.tensor([[1]]), torch.tensor([[2]])), r"\(prompt, chosen, rejected\)"),
    ({"prompt": torch.tensor([[1]])}, "missing \\['chosen', 'rejected'\\]"),
    ((torch.tensor([[1] * 10]), torch.tensor([[2] * 7]), torch.tensor([[3]])), "max_seq_len"),
])
def test_a_bad_batch_is_refused_before_any_update(tmp_path, batch, match):
    model, reference = policy(0), policy(1)
    before, ref_before = weights(model.net), weights(reference.net)
    with pytest.raises(ValueError, match=match):
        model.train(plan([batch]), train_step_fn=dpo_train_step_factory(reference, pad_id=PAD),
                    root=tmp_path, verbose=False)
    assert same(weights(model.net), before) and same(weights(reference.net), ref_before)


def test_the_policy_itself_as_reference_is_refused_without_freezing_it(tmp_path):
    model = policy(0)
    before = weights(model.net)
    with pytest.raises(ValueError, match=r"not model\.net itself"):
        model.train(plan(loader()), train_step_fn=dpo_train_step_factory(model, pad_id=PAD),
                    root=tmp_path, verbose=False)
    assert same(weights(model.net), before)
    assert all(p.requires_grad for p in model.net.parameters())


@pytest.mark.parametrize("call, error, match", [
    (lambda: dpo_train_step_factory(torch.nn.Linear(2, 2), pad_id=0), TypeError, "TransformerNN"),
    (lambda: dpo_train_step_factory(policy(1), beta=0.0, pad_id=0), ValueError, "beta"),
    (lambda: dpo_train_step_factory(policy(1), pad_id=V), ValueError, "pad_id"),
    (lambda: dpo_train_step_factory(policy(1), pad_id=-1), ValueError, "pad_id"),
])
def test_bad_factory_arguments_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()
