"""One update owner and well-formed results (spec §6.5): a second update owner, wrappers,
non-callables, the student as its own teacher and malformed results are refused; a
plain function objective trains."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import (
    LossTerm,
    NNTrainParams,
    ObjectiveContext,
    ObjectiveResult,
    default_train_step,
    kd_objective,
    supervised_objective,
)


# -- refusals: one update owner, objects not wrappers -----------------------------------
def refused(tmp_path, error, match, **kwargs):
    model = tiny_model()
    before = copy.deepcopy(model.net.state_dict())
    params = NNTrainParams(n_epochs=1, train_loader=tiny_batches(1), optim=sgd())
    with pytest.raises(error, match=match):
        model.train(params, root=tmp_path, verbose=False, **kwargs)
    assert not tmp_path.exists() or not [p for p in tmp_path.iterdir()
                                         if not p.name.startswith(".")]
    for k, v in model.net.state_dict().items():
        assert torch.equal(v, before[k])


def test_a_step_function_and_an_objective_together_are_refused(tmp_path):
    refused(tmp_path, ValueError, "exactly one update owner",
            train_step_fn=default_train_step, objective=supervised_objective())


def test_an_imperative_step_passed_as_the_objective_is_refused(tmp_path):
    refused(tmp_path, TypeError, "imperative step", objective=default_train_step)


def test_an_objective_passed_as_the_step_function_is_refused(tmp_path):
    refused(tmp_path, TypeError, "pass it as objective=", train_step_fn=supervised_objective())


@pytest.mark.parametrize("wrap", ["lambda", "partial"])
def test_a_wrapper_hiding_an_objective_is_refused(tmp_path, wrap):
    inner = supervised_objective()
    wrapper = (lambda ctx: inner(ctx)) if wrap == "lambda" else functools.partial(inner)
    refused(tmp_path, TypeError, "pass the objective itself", objective=wrapper)


def test_a_non_callable_objective_is_refused(tmp_path):
    refused(tmp_path, TypeError, "objective must be callable", objective=42)


def test_a_plain_function_objective_trains(tmp_path):
    def halved(ctx):
        result = supervised_objective()(ctx)
        term = result.terms[0]
        return ObjectiveResult([LossTerm("half", term.numerator, term.denominator, 0.5)])

    run = tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2),
                                           optim=sgd()),
                             objective=halved, root=tmp_path, verbose=False)
    assert run.idps[-1].update_count == 2


# -- the result types ---------------------------------------------------------------
def test_loss_term_and_result_validation():
    with pytest.raises(TypeError, match="one-element tensor"):
        LossTerm("t", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="denominator"):
        LossTerm("t", torch.tensor(1.0), -1.0)
    with pytest.raises(ValueError, match="weight"):
        LossTerm("t", torch.tensor(1.0), 1.0, weight=float("nan"))
    with pytest.raises(ValueError, match="unique"):
        ObjectiveResult([LossTerm("t", torch.tensor(1.0)), LossTerm("t", torch.tensor(2.0))])
    with pytest.raises(TypeError, match="non-empty"):
        ObjectiveResult([])
    term = LossTerm("t", torch.tensor(1.0), torch.tensor(4.0))
    assert term.denominator == 4.0 and term.reduction == "mean"
    assert LossTerm("t", torch.tensor(1.0)).reduction == "sum"
    half = torch.ones(2, dtype=torch.float16, requires_grad=True)
    full = ObjectiveContext.full_precision(half * 2)
    assert full.dtype == torch.float32 and full.requires_grad


def test_an_objective_returning_something_else_is_refused(tmp_path):
    with pytest.raises(TypeError, match="must return an ObjectiveResult"):
        tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(1), optim=sgd()),
                           objective=lambda ctx: 1.0, root=tmp_path, verbose=False)


def test_kd_objective_refuses_the_students_own_net_as_teacher(tmp_path):
    student = tiny_model()
    refused_run = kd_objective(student, 0.5, 2.0)
    assert all(p.requires_grad for p in student.net.parameters())  # nothing frozen yet
    with pytest.raises(ValueError, match="must not be the student's own net"):
        student.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(1), optim=sgd()),
                      objective=refused_run, root=tmp_path, verbose=False)
    assert not tmp_path.exists() or not [p for p in tmp_path.iterdir()
                                         if not p.name.startswith(".")]
    assert all(p.requires_grad for p in student.net.parameters())
