"""``nnx demo``: train a penguin-species classifier on data shipped inside nnx-core.

The Palmer Penguins measurements (CC0) are split 70 / 15 / 15 with a fixed
seed, standardized with statistics of the training rows only, and fed to a
small feed-forward net. The run lands in ``runs/<id>/`` like any other; the
id is the hash of the configuration, so a second identical demo finds its
run already there and says how to make another.
"""

from __future__ import annotations

import torch

from nnx._engine.training import RunExistsError
from nnx._foundation.seeding import set_seed
from nnx._persistence.run import display_path
from nnx._persistence.run_render import render_text
from nnx._surface.model import NNModel
from nnx.datasets import NNDataset
from nnx.datasets.penguins import load_penguins
from nnx.enums.activations import Activations
from nnx.enums.nets import Nets
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.params.optim import NNOptimParams
from nnx.params.scheduler import NNSchedulerParams
from nnx.params.train import NNTrainParams

__all__ = ["run_demo"]


def run_demo(*, epochs: int = 30, seed: int = 0, salt: str | None = None,
             overwrite: bool = False, verbose: bool | None = None) -> int:
    # A 32-wide MLP gains nothing from intra-op threads and loses a lot to them
    # when another process shares the cores; the demo's own process uses one.
    torch.set_num_threads(1)
    x, y, features, classes = load_penguins()
    def dataset(features_: torch.Tensor) -> NNDataset:
        return NNDataset(features_, y, val_proportion=0.15, test_proportion=0.15,
                         batch_sizes=(32, None, None), seed=seed, classes=classes)

    # Standardize with statistics of the training rows only: nothing leaks from val / test.
    train_rows = x[list(dataset(x).split_indices.train)]
    mean, std = train_rows.mean(0), train_rows.std(0)
    data = dataset((x - mean) / std)
    print(f"Palmer penguins: {len(y)} birds, {len(features)} measurements, "
          f"{len(classes)} species ({', '.join(classes)})")

    set_seed(seed)  # the initial weights too: the same run id trains the same model
    model = NNModel(
        net_params=NNParams(input_dim=len(features), output_dim=len(classes),
                            hidden_dims=(32, 32), activation=Activations.GELU, dropout_prob=0.1),
        params=NNModelParams(net=Nets.FEED_FWD),
    )
    params = NNTrainParams(
        n_epochs=epochs, train_loader=data.train_loader, val_loader=data.val_loader,
        optim=NNOptimParams.builder().adamw(max_lr=1e-2).build(),
        scheduler=NNSchedulerParams.builder().cosine_annealing(min_lr=1e-4).build(),
        seed=seed, data_id=f"penguins-70-15-15-seed{seed}", overwrite_existing=overwrite,
    )
    try:
        run = model.train(params, salt=salt, verbose=verbose)
    except RunExistsError as exc:
        print(f"\n{exc}.")
        print("Re-run it as a separate record:  uv run nnx demo --salt replicate-2")
        print("or replace it:                   uv run nnx demo --overwrite")
        print("Inspect it:                      uv run nnx runs show " + str(exc).split()[1])
        return 0
    if verbose is False:  # train() printed nothing; the demo still says where its run is
        print(f"Run saved to {display_path(run.path)}")
    print()
    print(render_text(run))
    best = run.best_checkpoint()
    if best is not None:
        print(f"\nBEST is epoch {best.epoch}: {run.checkpoints_dir.as_posix()}/best.pt")
    if data.test_loader is not None:
        tested = NNModel.from_checkpoint(run.checkpoints_dir / "best.pt").evaluate(
            data.test_loader)
        acc = "-" if tested.accuracy is None else f"{tested.accuracy:.1%}"
        print(f"test accuracy of BEST: {acc} on {len(data.split_indices.test)} held-out birds")
    return 0
