"""Errors as values at a boundary (spec §27): Ok / Err, bind, and a BoundaryError.

NNx raises; nnx.result lets the code at an edge of your program branch on a
value instead. Here two small boundaries of our own convert exactly the
exceptions they declare into ``Err(BoundaryError(code, where, context, cause))``:
parsing a plain-data training configuration (``invalid_params``) and reading a
run back from disk (``artifact_missing``). ``bind`` chains them with a tiny
training run; anything else, a bug in a callback for instance, still propagates.
Then the typed-decision wrappers nnx-decisions ships (§27): plain data through
``validate_decision_request_result`` bound to ``decide_result``, whose Err codes tell
an invalid request, an unsupported question and a malformed answer apart.

    uv run python examples/result_boundaries.py
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch

from nnx import Devices, NNModel, NNModelParams, NNParams, NNRun, NNTrainParams
from nnx.decisions import FixedHeadProvider, decide_result, validate_decision_request_result
from nnx.result import BoundaryError, Err, Ok, Result, UnwrapError


def train_params_result(plain: dict[str, Any]) -> Result[NNTrainParams, BoundaryError]:
    """Plain data → NNTrainParams; only its validation errors become an Err."""
    try:
        return Ok(NNTrainParams.from_state(plain))
    except (TypeError, ValueError) as exc:
        return Err(BoundaryError("invalid_params", "train_params_result", {"data": plain}, exc))


def load_run_result(run_id: str, root: str) -> Result[NNRun, BoundaryError]:
    """A run read back from disk; a missing run is an Err, a damaged one still raises."""
    try:
        return Ok(NNRun.load(run_id, root=root))
    except FileNotFoundError as exc:
        return Err(BoundaryError("artifact_missing", "load_run_result", {"run_id": run_id}, exc))


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    y = (x[:, 0] > 0).long()
    return [(x[i:i + 8], y[i:i + 8]) for i in range(0, 32, 8)]


def train(params: NNTrainParams, root: str) -> Result[NNRun, BoundaryError]:
    torch.manual_seed(params.seed or 0)
    model = NNModel(NNParams(input_dim=4, output_dim=2, hidden_dims=(8,)),
                    NNModelParams(device=Devices.CPU))
    run = model.train(params.with_train_loader(batches()), verbose=False, root=root)
    return load_run_result(run.id, root)  # read back: what was committed


def describe(result: Result[NNRun, BoundaryError]) -> str:
    match result:  # each branch is narrowed: .value is an NNRun, .error a BoundaryError
        case Ok(run):
            return f"ok: run {run.id} with {len(run.epoch_records())} epochs"
        case Err(error):
            return f"err: {error.code} in {error.where} ({type(error.cause).__name__})"
    raise AssertionError(result)


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        good = train_params_result({"n_epochs": 2, "seed": 3, "scheduler": None})
        trained = good.bind(lambda params: train(params, root))
        print(describe(trained))
        assert isinstance(trained, Ok) and len(trained.value.epoch_records()) == 2

        bad = train_params_result({"n_epochs": 0}).bind(lambda params: train(params, root))
        print(describe(bad))
        assert isinstance(bad, Err) and bad.error.code == "invalid_params"
        assert bad.error.context["data"] == {"n_epochs": 0}

        missing = load_run_result("no-such-run", root)
        print(describe(missing))
        # map_error turns the typed error into what the caller shows; recover substitutes.
        print(missing.map_error(str).error)
        fallback = missing.recover(lambda error: Ok(None))
        assert isinstance(fallback, Ok) and fallback.value is None  # Ok(None) is a success

        try:
            missing.unwrap()
        except UnwrapError as exc:
            assert exc.error is missing.error and isinstance(exc.__cause__, FileNotFoundError)
            print(f"unwrap() raised UnwrapError carrying {exc.error.code}")

        # Nothing is caught on your behalf: a callback's own bug propagates unchanged.
        try:
            good.map(lambda params: params.n_epochs / 0)
        except ZeroDivisionError:
            print("a callback's ZeroDivisionError propagated")
        try:
            bool(good)
        except TypeError:
            print("a Result has no truth value: test isinstance(result, Ok) or .is_ok")
    decisions()


def decisions() -> None:
    """The §27 decision wrappers: each Err code names which boundary refused what."""
    torch.manual_seed(0)
    model = NNModel(NNParams(input_dim=4, output_dim=2, hidden_dims=(8,)),
                    NNModelParams(device=Devices.CPU))
    provider = FixedHeadProvider(model, labels=("no", "yes"))
    x = batches()[0][0]
    plain = {"kind": "choice", "prompt": "Is feature 0 positive?",
             "options": [{"id": "yes", "description": "Yes"},
                         {"id": "no", "description": "No"}]}
    answered = validate_decision_request_result(plain).bind(
        lambda q: decide_result(provider, q, x))
    assert isinstance(answered, Ok) and len(answered.value) == len(x)
    print(f"decision: ok, {len(answered.value)} answers, first {answered.value[0].choice}")
    for data in ({"kind": "choice", "prompt": "?", "options": []},           # invalid request
                 {**plain, "options": plain["options"] + [                  # not the head's
                     {"id": "maybe", "description": "Maybe"}]}):
        refused = validate_decision_request_result(data).bind(
            lambda q: decide_result(provider, q, x))
        assert isinstance(refused, Err)
        print(f"decision: err, {refused.error.code} in {refused.error.where}")


if __name__ == "__main__":
    main()
