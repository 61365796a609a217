"""A declared regression task on the default loop: masking, records, decoding (spec §6.3).

``NNModelParams(task=TaskSpec.regression(2))`` hands validation, masking,
metrics and decoding to the task's adapter, with no custom hook:

* NaN targets are masked: excluded from the loss and every metric alike, so
  a half-labelled row still trains on its labelled output;
* records carry ``kind="regression"``, the count of valid targets and
  ``mse`` / ``mae`` in ``metrics``; the classification fields and ``error``
  stay ``None``, so BEST and plateau scheduling track the loss;
* ``predict().classes`` and ``predict_proba().decoded`` are the values
  themselves (``probabilities=None``, ``spec=None``);
* a target of the wrong shape raises ``TaskValidationError`` before any
  update, leaving the weights untouched;
* a custom step can write the same record the default step writes with
  ``model.task_adapter.record(output, target, loss=...)``.

    uv run python examples/regression_task.py
"""

from __future__ import annotations

import math
import tempfile

import torch

from nnx import (
    Devices,
    Losses,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    TaskSpec,
    TaskValidationError,
    TrainStepContext,
)

Batches = list[tuple[torch.Tensor, torch.Tensor]]


def data() -> tuple[Batches, Batches]:
    """Two targets per row, [x0 + x1, x0 · x2]; every 5th row's second target is unlabelled."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(240, 3, generator=g)
    y = torch.stack([x[:, 0] + x[:, 1], x[:, 0] * x[:, 2]], dim=1)
    y = y + 0.05 * torch.randn(y.shape, generator=g)
    y[::5, 1] = float("nan")  # masked, not zero
    train = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 192, 32)]
    val = [(x[192:], y[192:])]
    return train, val


def model() -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(32, 32)),
                   params=NNModelParams(device=Devices.CPU, loss=Losses.MEAN_SQUARED_ERROR,
                                        task=TaskSpec.regression(2)))


def masked_mse_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
    """A custom step with its own masked loss, reporting through the task's record."""
    x, y = ctx.batch
    ctx.optimizer.zero_grad()
    output = ctx.model.net(x)
    valid = ~torch.isnan(y)
    loss = ((output - y.nan_to_num()) ** 2)[valid].mean()
    loss.backward()
    ctx.optimizer.step()
    ctx.report_update()
    return ctx.model.task_adapter.record(output.detach(), y, loss=loss.detach())


def main() -> None:
    train, val = data()
    params = NNTrainParams(n_epochs=10, train_loader=train, val_loader=val, seed=0,
                           optim=NNOptimParams.builder().adam(max_lr=1e-2).build())
    with tempfile.TemporaryDirectory() as root:
        net = model()
        run = net.train(params, verbose=False, root=root)
        print("epoch  val loss  val mse  val mae  valid targets")
        for record in run.epoch_records():
            v = record.val_edp
            assert v is not None and v.kind == "regression" and v.status == "ok"
            assert v.accuracy is None and v.error is None  # never a fabricated accuracy
            print(f"{record.epoch:>5}  {v.loss:>8.4f}  {v.metrics['mse']:>7.4f}  "
                  f"{v.metrics['mae']:>7.4f}  {v.count:>13}")
        x_val, y_val = val[0]
        n_valid = int((~torch.isnan(y_val)).sum())
        final = net.evaluate(val)
        assert final.count == n_valid < y_val.numel()
        assert final.loss is not None and final.loss < 0.1, final
        print(f"{n_valid} of {y_val.numel()} validation targets are labelled; "
              f"the NaN ones count nowhere")

        prediction = net.predict_proba(x_val[:3])
        assert prediction.probabilities is None and prediction.spec is None
        assert torch.equal(torch.as_tensor(prediction.decoded), net.predict(x_val[:3]).classes)
        print(f"decoded values of 3 rows:\n{torch.as_tensor(prediction.decoded)}")

        before = {k: v.clone() for k, v in net.net.state_dict().items()}
        flat = [(x_val, y_val[:, 0])]  # (N,) targets for a (N, 2) output: nothing broadcasts
        try:
            net.train(NNTrainParams(n_epochs=1, train_loader=flat), verbose=False, root=root)
        except TaskValidationError as exc:
            print(f"refused: {exc}")
        else:
            raise AssertionError("a mis-shaped target trained")
        assert all(torch.equal(v, before[k]) for k, v in net.net.state_dict().items())

        custom = model().train(params, train_step_fn=masked_mse_step, verbose=False, root=root,
                               salt="custom-step")
        edp = custom.idps[-1].train_edp
        assert edp is not None and edp.kind == "regression" and edp.loss is not None
        assert math.isclose(edp.metrics["mse"], edp.loss, rel_tol=1e-5)
        print(f"custom step's record: kind={edp.kind} count={edp.count} "
              f"mse={edp.metrics['mse']:.4f} (= its masked loss)")


if __name__ == "__main__":
    main()
