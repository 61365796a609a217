"""born_again_train (spec §10): generation 0 supervised, then each distils the previous."""

from __future__ import annotations

import re

import pytest
import torch
from _kd_tiny import batches, classifier, plan, same, weights

from nnx import Callback, Precision
from nnx.paradigms import BornAgainGeneration, born_again_train, kd_train_step_factory
from nnx.paradigms.born_again import generation_salt


class Snapshot(Callback):
    """Copies the teacher's weights when its student's run begins and ends."""

    def __init__(self, teacher, seen):
        self.teacher, self.seen = teacher, seen

    def on_train_begin(self, ctx):
        self.seen["begin"] = weights(self.teacher)

    def on_train_end(self, ctx):
        self.seen["end"] = weights(self.teacher)


def test_two_generations_each_its_own_run_and_the_teacher_unchanged(tmp_path):
    built: list = []
    seen: dict[str, dict[str, torch.Tensor]] = {}

    def make(g):
        built.append(classifier(g))
        return built[-1]

    out = born_again_train(make, generations=2, params=plan(batches(), n_epochs=2),
                           alpha=0.5, temperature=2.0, root=tmp_path, verbose=False,
                           callbacks=lambda g: [Snapshot(built[0], seen)] if g else [])
    assert isinstance(out[0], BornAgainGeneration) and [g.generation for g in out] == [0, 1]
    assert [g.model for g in out] == built
    assert out[0].run.id != out[1].run.id
    assert [g.run.salt for g in out] == ["born-again:gen0", "born-again:gen1"]
    assert same(seen["begin"], seen["end"])  # the teacher never moved while gen 1 trained
    assert not any(p.requires_grad for p in out[0].model.net.parameters())
    assert all(p.requires_grad for p in out[1].model.net.parameters())


def test_generation_one_is_kd_from_generation_zero(tmp_path):
    out = born_again_train(classifier, generations=2, params=plan(batches()), alpha=0.3,
                           temperature=2.0, root=tmp_path / "ba", verbose=False)
    ref = classifier(1)
    ref.train(plan(batches()), train_step_fn=kd_train_step_factory(
        out[0].model, alpha=0.3, temperature=2.0), root=tmp_path / "ref", verbose=False)
    assert same(weights(ref), weights(out[1].model))
    plain = classifier(0)
    plain.train(plan(batches()), root=tmp_path / "plain", verbose=False)
    assert same(weights(plain), weights(out[0].model))  # generation 0: the supervised step


def test_identical_generations_still_get_their_own_run_ids(tmp_path):
    out = born_again_train(lambda g: classifier(0), generations=2, params=plan(batches()),
                           root=tmp_path, verbose=False, salt="exp")
    assert out[0].run.id != out[1].run.id
    assert out[1].run.salt == generation_salt(1, "exp") == "exp/born-again:gen1"


def test_bad_arguments_are_refused_before_generation_zero_trains(tmp_path):
    params = plan(batches())
    for kwargs, error, match in [({"generations": 0}, ValueError, "generations"),
                                 ({"alpha": 2.0}, ValueError, "alpha"),
                                 ({"temperature": 0.0}, ValueError, "temperature")]:
        with pytest.raises(error, match=match):
            born_again_train(classifier, params=params, root=tmp_path,
                             **{"generations": 2, **kwargs})
    with pytest.raises(TypeError, match="NNTrainParams"):
        born_again_train(classifier, generations=2, params={}, root=tmp_path)
    with pytest.raises(TypeError, match="make_student"):
        born_again_train("model", generations=2, params=params, root=tmp_path)
    assert not tmp_path.joinpath("runs").exists() and not any(tmp_path.iterdir())


def test_a_make_student_returning_an_earlier_model_is_refused(tmp_path):
    only = classifier(0)
    with pytest.raises(ValueError, match="earlier generation's model"):
        born_again_train(lambda g: only, generations=2, params=plan(batches()), root=tmp_path,
                         verbose=False)
    with pytest.raises(TypeError, match="not an NNModel"):
        born_again_train(lambda g: only.net, generations=1, params=plan(batches()),
                         root=tmp_path, verbose=False)


def test_a_reduced_precision_student_refuses_the_kd_generation_before_its_run(tmp_path):
    def make(g):
        return classifier(g, precision=Precision.FP16 if g else None)

    with pytest.raises(ValueError, match="full-precision-only"):
        born_again_train(make, generations=2, params=plan(batches()), root=tmp_path,
                         verbose=False)
    runs = [p for p in tmp_path.iterdir() if p.is_dir() and re.fullmatch(r"[0-9a-f]{32}", p.name)]
    assert len(runs) == 1  # generation 0's run only
