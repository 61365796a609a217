"""Regression validation through a custom eval_step_fn, on the default training loop (§6.2).

The default supervised step trains a feed-forward net with MSE; validation is
the hook's: NNx calls it once per epoch, under ``torch.no_grad()`` with the
net in eval mode, and it returns one ``NNEvaluationDataPoint`` for the whole
validation loader. It reports the MSE as ``loss`` and mirrors it into
``error`` (never a classification accuracy), so BEST, ``runs/best`` and
``ReduceLROnPlateau`` all follow the validation MSE. Extra values (RMSE, MAE,
R²) are persisted in ``idp.val_edp.extra``.

    uv run python examples/26_custom_eval_step.py
"""

from __future__ import annotations

import math
import tempfile

import torch

from nnx import (
    Devices,
    EvalStepContext,
    Losses,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
)

Batches = list[tuple[torch.Tensor, torch.Tensor]]


def regression_data() -> tuple[Batches, Batches]:
    """y = sin(x0) + 0.5·x1 - x2² / 4 + noise; 192 training rows, 64 validation rows."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 3, generator=g)
    y = (torch.sin(x[:, 0]) + 0.5 * x[:, 1] - x[:, 2] ** 2 / 4).unsqueeze(1)
    y = y + 0.05 * torch.randn(y.shape, generator=g)
    train = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 192, 32)]
    val = [(x[i:i + 32], y[i:i + 32]) for i in range(192, 256, 32)]
    return train, val


def regression_eval(ctx: EvalStepContext) -> NNEvaluationDataPoint:
    # NNx owns the mode and the grad switch; the hook owns iteration and aggregation.
    assert not ctx.model.net.training and not torch.is_grad_enabled()
    targets, outputs = [], []
    for x, y in ctx.val_loader:
        outputs.append(ctx.model.net(x.to(ctx.model.device)).cpu())
        targets.append(y)
    pred, true = torch.cat(outputs), torch.cat(targets)
    mse = float(((pred - true) ** 2).mean())
    r2 = 1.0 - mse / float(true.var(unbiased=False))
    return NNEvaluationDataPoint(
        loss=mse,
        error=mse,  # mirrored: BEST and the plateau scheduler read the validation MSE
        extra={"rmse": math.sqrt(mse), "mae": float((pred - true).abs().mean()), "r2": r2},
    )


def main() -> None:
    train, val = regression_data()
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=1, hidden_dims=(32, 32)),
                    params=NNModelParams(device=Devices.CPU, loss=Losses.MEAN_SQUARED_ERROR))
    params = NNTrainParams(
        n_epochs=10, train_loader=train, val_loader=val, seed=0,
        optim=NNOptimParams.builder().adam(max_lr=1e-2).build(),
        scheduler=NNSchedulerParams.builder().reduce_on_plateau(factor=0.5, patience=1).build())
    with tempfile.TemporaryDirectory() as root:
        run = model.train(params, eval_step_fn=regression_eval, verbose=False, root=root)
        reloaded = NNRun.load(run.id, root=root)  # the extra values persist in idps.csv
        print("epoch  val mse   rmse    mae     r2      lr")
        records = reloaded.epoch_records()
        for record in records:
            val_edp = record.val_edp
            assert val_edp is not None and val_edp.accuracy is None
            extra = val_edp.extra
            print(f"{record.epoch:>5}  {val_edp.loss:.4f}  {extra['rmse']:.4f}  "
                  f"{extra['mae']:.4f}  {extra['r2']:.3f}  {record.lr:.4g}")
        best = run.best_checkpoint()
        assert best is not None
        scores = {r.epoch: r.val_edp.error for r in records if r.val_edp is not None}
        print(f"BEST is epoch {best.epoch}, the lowest validation MSE ({scores[best.epoch]:.4f})")
        assert scores[best.epoch] == min(s for s in scores.values() if s is not None)
        last = records[-1].val_edp
        assert last is not None and last.extra["r2"] > 0.8, last


if __name__ == "__main__":
    main()
