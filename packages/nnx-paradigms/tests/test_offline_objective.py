"""TeacherDataset.objective (spec §10.1 "Objective", "Labels and accumulation", "Identity")."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _kd_tiny import classifier, files, plan, same, sgd, weights
from _offline_tiny import CANDIDATES, DIGEST, dataset, inputs, record, records

from nnx import Devices, Losses, NNModel, NNModelParams, kd_objective
from nnx.components import ComponentRestoreError
from nnx.paradigms import born_again_train, kd_train_step_factory
from nnx.paradigms.offline_distillation import TeacherDataset


class ZeroLogits(torch.nn.Module):
    """Two logits, both a trainable bias starting at zero, whatever the input."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return self.bias.expand(x.shape[0], 2)


def test_the_spec_number_q_075_025_against_zero_logits(tmp_path):
    rec = record("s0", ("yes", "no"), (0.75, 0.25))
    data = TeacherDataset([rec], {"s0": torch.zeros(1)}, candidates=("yes", "no"),
                          schema_digest=DIGEST)
    model = NNModel(module=ZeroLogits(),
                    params=NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))
    run = model.train(plan(data.loader(1), optim=sgd(lr=1.0)), objective=data.objective(1.0),
                      root=tmp_path, verbose=False)
    assert run.idps[0].train_edp.loss == pytest.approx(0.130812, abs=5e-7)
    # One SGD step at lr 1 moves the logits by minus the gradient, p − q = [−0.25, 0.25].
    assert model.net.bias.detach().tolist() == pytest.approx([0.25, -0.25], abs=1e-7)


def written_out(model, data, alpha):
    logits = model.net(data.inputs)
    q = data.probabilities
    kl = (torch.xlogy(q, q) - q * F.log_softmax(logits, 1)).sum(1).mean()
    return alpha * kl + (1 - alpha) * F.cross_entropy(logits, data.labels)


def test_the_loss_is_alpha_kl_plus_one_minus_alpha_ce_at_temperature_one(tmp_path):
    data = dataset(5)
    model, ref = classifier(0), classifier(0)
    run = model.train(plan(data.loader(5)), objective=data.objective(0.7), root=tmp_path,
                      verbose=False)
    expected = written_out(ref, data, 0.7)
    assert run.idps[0].train_edp.loss == pytest.approx(float(expected.detach()), abs=1e-6)
    ref.net.zero_grad()
    expected.backward()
    with torch.no_grad():
        for p in ref.net.parameters():
            p -= 0.1 * p.grad
    for k, v in weights(ref).items():
        torch.testing.assert_close(weights(model)[k], v, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("alpha", [1.0, 0.6, 0.0])
def test_accumulation_over_uneven_microbatches_equals_the_full_batch(tmp_path, alpha):
    data = dataset(5)
    full, split = classifier(0), classifier(0)
    full.train(plan(data.loader(5)), objective=data.objective(alpha), root=tmp_path / "f",
               verbose=False)
    split.train(plan(data.loader(3), optim=sgd(accumulate=2)), objective=data.objective(alpha),
                root=tmp_path / "s", verbose=False)
    for k, v in weights(full).items():
        torch.testing.assert_close(weights(split)[k], v, atol=1e-6, rtol=1e-5)


def test_the_teacher_probabilities_are_detached_and_never_change(tmp_path):
    data = dataset(5)
    before = data.probabilities.clone()
    classifier(0).train(plan(data.loader(2), n_epochs=2), objective=data.objective(0.5),
                        root=tmp_path, verbose=False)
    assert torch.equal(data.probabilities, before) and not data.probabilities.requires_grad


def test_a_partly_labelled_dataset_is_refused_and_alpha_below_one_needs_every_label():
    with pytest.raises(ValueError, match="partly labelled"):
        dataset(5, labelled="partial").objective(1.0)
    with pytest.raises(ValueError, match="needs every record labelled"):
        dataset(5, labelled="none").objective(0.9)
    assert dataset(5, labelled="none").objective(1.0).alpha == 1.0
    for bad in (-0.1, 1.1, float("nan")):
        with pytest.raises(ValueError, match="alpha"):
            dataset(5).objective(bad)


def test_a_partly_labelled_batch_is_refused_before_any_update(tmp_path):
    objective = dataset(4).objective(1.0)
    partial = dataset(4, labelled="partial")  # s0 labelled, s1 not
    model = classifier(0)
    before = weights(model)
    with pytest.raises(ValueError, match=r"partly labelled batch \(1 of 2 rows\)"):
        model.train(plan(partial.loader(2)), objective=objective, root=tmp_path, verbose=False)
    assert same(weights(model), before)


def test_a_batch_with_another_candidate_order_is_refused_before_any_update(tmp_path):
    objective = dataset(4).objective(0.5)
    other = dataset(4, candidates=("dog", "cat", "fox"))
    model = classifier(0)
    before = weights(model)
    with pytest.raises(ValueError, match=r"candidate order \('dog', 'cat', 'fox'\) is not"):
        model.train(plan(other.loader(2)), objective=objective, root=tmp_path, verbose=False)
    assert same(weights(model), before)


def test_a_plain_batch_or_a_wrong_width_student_is_refused(tmp_path):
    data = dataset(4)
    model = classifier(0)
    before = weights(model)
    with pytest.raises(TypeError, match="needs TeacherDataset batches"):
        model.train(plan([(torch.randn(2, 4), torch.tensor([0, 1]))]),
                    objective=data.objective(0.5), root=tmp_path / "a", verbose=False)
    wide = NNModel(module=torch.nn.Linear(4, 5),
                   params=NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))
    with pytest.raises(ValueError, match=r"\(rows, 3\), one logit per candidate"):
        wide.train(plan(data.loader(2)), objective=data.objective(0.5), root=tmp_path / "b",
                   verbose=False)
    assert same(weights(model), before)


def test_the_identity_holds_version_digest_alpha_and_alignment():
    objective = dataset(3).objective(0.25)
    assert objective.identity() == {"format": "nnx.offline-distillation/1", "version": 1,
                                    "schema_digest": DIGEST, "alpha": 0.25,
                                    "candidates": list(CANDIDATES)}
    spec = objective.component_spec()
    assert spec.name == "paradigms.offline_distillation" and spec.required
    assert objective.component_state() == objective.identity()


def run(tmp_path, n_epochs, data, alpha, **kwargs):
    model = classifier(0)
    r = model.train(plan(data.loader(2), n_epochs=n_epochs, **kwargs),
                    objective=data.objective(alpha), root=tmp_path, verbose=False)
    return model, r


def test_a_2_plus_1_stateful_resume_equals_3_straight_epochs(tmp_path):
    data = dataset(5)
    straight, _ = run(tmp_path / "straight", 3, data, 0.5)
    _, first = run(tmp_path / "resumed", 2, data, 0.5)
    resumed, rest = run(tmp_path / "resumed", 1, data, 0.5, resume_from_run_id=first.id,
                        resume_mode="stateful")
    assert same(weights(straight), weights(resumed))
    assert "paradigms.offline_distillation" in rest.resume_status.restored_components


@pytest.mark.parametrize("change, match", [
    ("alpha", "alpha=0.5.*alpha=0.75"),
    ("digest", "schema_digest='schema-1'.*schema_digest='schema-2'"),
    ("alignment", "candidates=.*resume with the same dataset"),
])
def test_a_stateful_resume_with_a_changed_identity_is_refused_before_any_update(
        tmp_path, change, match):
    data = dataset(5)
    _, first = run(tmp_path, 2, data, 0.5)
    alpha = 0.75 if change == "alpha" else 0.5
    if change == "digest":
        recs = [record(r.sample_id, r.candidates, r.probabilities, schema_digest="schema-2")
                for r in records(5)]
        other = TeacherDataset(recs, inputs(5), candidates=CANDIDATES, schema_digest="schema-2",
                               labels={s: CANDIDATES[0] for s in inputs(5)})
    elif change == "alignment":
        other = dataset(5, candidates=("fox", "dog", "cat"))
    else:
        other = data
    model = classifier(3)
    before, disk = weights(model), files(tmp_path)
    with pytest.raises(ComponentRestoreError, match=match):
        model.train(plan(other.loader(2), n_epochs=1, resume_from_run_id=first.id,
                         resume_mode="stateful"),
                    objective=other.objective(alpha), root=tmp_path, verbose=False)
    assert same(weights(model), before) and files(tmp_path) == disk


def test_the_live_paths_refuse_teacher_records(tmp_path):
    data = dataset(4)
    teacher, model = classifier(7), classifier(0)
    before = weights(model)
    with pytest.raises(TypeError, match=r"TeacherDataset batch .*dataset\.objective"):
        model.train(plan(data.loader(2)), train_step_fn=kd_train_step_factory(teacher),
                    root=tmp_path / "step", verbose=False)
    with pytest.raises(ValueError, match="TeacherBatch"):
        model.train(plan(data.loader(2)), objective=kd_objective(teacher, 0.5, 4.0),
                    root=tmp_path / "objective", verbose=False)
    with pytest.raises(TypeError, match=r"born_again_train .*TeacherDataset batch"):
        born_again_train(lambda g: classifier(g), generations=2, params=plan(data.loader(2)),
                         root=tmp_path / "ba")
    assert same(weights(model), before) and not (tmp_path / "ba").exists()


def test_the_identity_records_into_an_experiment_manifest():
    from nnx.provenance import ExperimentManifest

    objective = dataset(3).objective(0.5)
    a = ExperimentManifest.for_model(classifier(0), objective=objective.identity())
    b = ExperimentManifest.for_model(classifier(0), objective=dataset(3).objective(0.6).identity())
    assert a.objective["alpha"] == 0.5 and a.objective["schema_digest"] == DIGEST
    assert a.fingerprint != b.fingerprint
