"""Train-only preprocessing: raw and transformed views (spec §13.4).

Statistics fitted on every row leak held-out values into training.
``NNTabularDataset(standardize=True)`` fits a ``Standardizer`` on the training
split only, after the same split it would draw without standardization; the
DataFrame stays raw and the loaders hold prepared features. The fitted
standardizer is primitive JSON (``nnx.preprocessing/1``) that reloads
float64-exact, so inference applies the reloaded one exactly once:
``model.predict(standardizer.transform(raw_rows))``. The fitted state (never
recomputed statistics) goes into the experiment manifest. Split transforms
(``NNDataset(train_transform=..., eval_transform=...)``) change inputs only.

    uv run python examples/preprocessing_offline.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from nnx import NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams, TaskSpec
from nnx.datasets import NNDataset, NNTabularDataset
from nnx.preprocessing import PreprocessingError, Standardizer
from nnx.provenance import ExperimentManifest

FEATURES = ["age", "income"]


def patients(n: int = 400) -> pd.DataFrame:
    """Two features on very different scales; the label depends on both."""
    g = np.random.default_rng(0)
    age = g.normal(45.0, 12.0, n)
    income = g.normal(52_000.0, 15_000.0, n)
    label = np.where((age - 45.0) / 12.0 + (income - 52_000.0) / 15_000.0 > 0, "high", "low")
    return pd.DataFrame({"row_id": np.arange(n), "age": age, "income": income,
                         "label": label})


def main() -> None:
    df = patients()
    raw = df.copy()
    ds = NNTabularDataset(df, FEATURES, "label", val_proportion=0.2, test_proportion=0.2,
                          batch_sizes=(32, None, None), seed=0, standardize=True)
    standardizer = ds.standardizer
    assert standardizer is not None
    pd.testing.assert_frame_equal(df, raw)  # the source DataFrame is never modified

    # The fit read the training rows only: moving every held-out value changes nothing.
    held_out = [*ds.split_indices.val, *ds.split_indices.test]
    shifted = df.copy()
    shifted.loc[held_out, "income"] *= 100
    same = NNTabularDataset(shifted, FEATURES, "label", val_proportion=0.2,
                            test_proportion=0.2, seed=0, standardize=True).standardizer
    assert same == standardizer
    print(f"fitted on {standardizer.n_rows} training rows: mean={standardizer.mean} "
          f"scale={standardizer.scale}")

    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=2, output_dim=2, hidden_dims=(16,)),
                    params=NNModelParams(task=TaskSpec.categorical(2)))
    params = NNTrainParams(n_epochs=5, train_loader=ds.train_loader, val_loader=ds.val_loader,
                           seed=0, optim=NNOptimParams.builder().adam(max_lr=1e-2).build())
    with tempfile.TemporaryDirectory() as root:
        run = model.train(params, verbose=False, root=root)
    val = run.idps[-1].val_edp
    assert val is not None and val.accuracy is not None and val.accuracy > 0.8, val
    print(f"validation accuracy after 5 epochs: {val.accuracy:.3f}")

    # Save, reload float64-exact, and apply the reloaded standardizer once at inference.
    path = Path("standardizer.json")
    standardizer.save(path)  # atomic; a second run simply replaces it
    reloaded = Standardizer.load(path)
    assert [m.hex() for m in reloaded.mean] == [m.hex() for m in standardizer.mean]
    assert reloaded.digest() == standardizer.digest()
    test_rows = list(ds.split_indices.test)
    raw_rows = df.iloc[test_rows]  # raw values, every column: the schema picks its own
    prepared = torch.cat([x for x, _ in ds.test_loader])
    assert torch.equal(reloaded.transform(raw_rows), prepared)
    assert torch.equal(model.predict(reloaded.transform(raw_rows)).logits,
                       model.predict(prepared).logits)
    one = reloaded(df.iloc[test_rows[0]])  # one row gives exactly the batch's row
    assert torch.equal(one, prepared[0])
    print(f"reloaded {path} (digest {reloaded.digest()[:12]}...) predicts like the loaders")

    plan = ExperimentManifest.for_model(model, preprocessing=reloaded)
    assert plan.preprocessing["state"]["mean"] == tuple(standardizer.mean)
    print(f"manifest fingerprint {plan.fingerprint[:12]}... records the fitted state")

    try:
        reloaded.transform(df[["income", "age"]])
    except PreprocessingError as exc:
        print(f"refused: {exc}")
    else:
        raise AssertionError("reordered columns were standardized")

    # Split transforms: a noisy training view, a clean evaluation view; targets untouched.
    X = torch.tensor(df[FEATURES].to_numpy())  # float64 rows, copied out of the DataFrame
    Y = torch.tensor((df["label"] == "high").to_numpy())
    views = NNDataset(X, Y.long(), val_proportion=0.2, seed=0, batch_sizes=(64, None, None),
                      train_transform=lambda x: x + 0.01 * torch.randn_like(x),
                      eval_transform=reloaded)
    xv, yv = next(iter(views.val_loader))
    rows = list(views.split_indices.val)
    assert torch.equal(xv, reloaded.transform(X[rows])) and torch.equal(yv, Y.long()[rows])
    state = views.state()
    print(f"views: the train transform is a runtime callable (reconstructible="
          f"{state['train_transform']['reconstructible']}), the eval one a Standardizer "
          f"(reconstructible={state['eval_transform']['reconstructible']})")


if __name__ == "__main__":
    main()
