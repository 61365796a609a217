"""evaluate_offline and TeacherDataset.eval_step (spec §10.1 "Reports")."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from _kd_tiny import classifier, plan, same, weights
from _offline_tiny import dataset

from nnx import MonitorSpec
from nnx.metrics import MetricSpec
from nnx.paradigms import evaluate_offline
from nnx.paradigms.offline_distillation import OfflineReport


def by_hand(model, data):
    with torch.no_grad():
        logits = model.net.eval()(data.inputs)
    q = data.probabilities
    kl = (torch.xlogy(q, q) - q * F.log_softmax(logits, 1)).sum(1)
    agree = (logits.argmax(1) == q.argmax(1)).float()
    mask = data.labels >= 0
    correct = (logits.argmax(1)[mask] == data.labels[mask]).float()
    nll = F.cross_entropy(logits[mask], data.labels[mask], reduction="none")
    return agree.mean(), kl.mean(), int(mask.sum()), correct.mean(), nll.mean()


def test_three_parts_each_with_its_own_denominator():
    data = dataset(7, labelled="partial")  # 4 of 7 labelled
    model = classifier(0)
    report = evaluate_offline(model, data, batch_size=3)
    agree, kl, labelled, acc, nll = by_hand(model, data)
    assert isinstance(report, OfflineReport)
    assert report.agreement.records == 7 and report.imitation.records == 7
    assert report.agreement.agreement == pytest.approx(float(agree))
    assert report.imitation.loss == pytest.approx(float(kl), abs=1e-6)
    assert report.labelled.records == labelled == 4
    assert report.labelled.accuracy == pytest.approx(float(acc))
    assert report.labelled.nll == pytest.approx(float(nll), abs=1e-6)
    text = report.text()
    assert "teacher agreement" in text and "over 7 records" in text
    assert "imitation loss" in text and "over 4 labelled records" in text


def test_without_labels_the_labelled_part_is_absent():
    report = evaluate_offline(classifier(0).net, dataset(4, labelled="none"))
    assert report.labelled.records == 0 and report.labelled.accuracy is None
    assert "no labelled records" in report.text()


def test_evaluation_changes_nothing_in_the_student():
    model = classifier(0)
    model.net.train()
    before = weights(model)
    evaluate_offline(model, dataset(5))
    assert same(weights(model), before) and model.net.training
    assert all(p.grad is None for p in model.net.parameters())


def test_evaluate_offline_refuses_other_data_and_students():
    with pytest.raises(TypeError, match="TeacherDataset"):
        evaluate_offline(classifier(0), [(torch.randn(2, 4), torch.tensor([0, 1]))])
    with pytest.raises(TypeError, match=r"NNModel or an nn\.Module"):
        evaluate_offline("student", dataset(3))
    with pytest.raises(ValueError, match="batch_size"):
        evaluate_offline(classifier(0), dataset(3), batch_size=0)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_the_eval_step_record_loss_is_the_imitation_loss_whatever_alpha(tmp_path, alpha):
    train, held_out = dataset(6), dataset(5, labelled="partial")
    model = classifier(0)
    run = model.train(plan(train.loader(3), val_loader=held_out.loader(2)),
                      objective=train.objective(alpha), eval_step_fn=held_out.eval_step(),
                      root=tmp_path, verbose=False)
    val = run.idps[-1].val_edp
    report = evaluate_offline(model, held_out)
    assert val.loss == pytest.approx(report.imitation.loss, abs=1e-6)
    assert val.metrics["label_accuracy"] == pytest.approx(report.labelled.accuracy)
    assert val.metrics["label_nll"] == pytest.approx(report.labelled.nll, abs=1e-6)
    assert val.extra["teacher_agreement"] == pytest.approx(report.agreement.agreement)
    assert val.error is None  # imitation is not being right: select on label_* by name


def test_a_monitor_selects_on_label_accuracy_by_name(tmp_path):
    train, held_out = dataset(6), dataset(4)
    run = classifier(0).train(
        plan(train.loader(3), n_epochs=2, val_loader=held_out.loader(4),
             metrics=(MetricSpec("label_accuracy"), MetricSpec("label_nll")),
             monitor=MonitorSpec(metric="label_accuracy")),
        objective=train.objective(0.5), eval_step_fn=held_out.eval_step(), root=tmp_path,
        verbose=False)
    decisions = [idp.selection for idp in run.idps if idp.selection is not None]
    assert len(decisions) == 2
    assert all(d.metric == "label_accuracy" and d.direction == "max" and d.status == "ok"
               for d in decisions)
    assert decisions[-1].value == pytest.approx(
        [i.val_edp for i in run.idps if i.val_edp is not None][-1].metrics["label_accuracy"])


def test_the_label_metrics_are_registered_through_entry_points():
    from nnx.metrics import metric_modes, resolve_metric

    acc, nll = resolve_metric(MetricSpec("label_accuracy")), resolve_metric(MetricSpec("label_nll"))
    assert (acc.input, acc.mode, nll.input, nll.mode) == ("labels", "max", "probabilities", "min")
    a = acc.factory({})
    a.update([0, 1, 2], [0, 2, 2])
    n = nll.factory({})
    n.update([0, 1], [[0.5, 0.5], [0.25, 0.75]])
    assert a.result() == pytest.approx(2 / 3)
    assert n.result() == pytest.approx(-(math.log(0.5) + math.log(0.75)) / 2)
    assert metric_modes  # the registry answers by name
