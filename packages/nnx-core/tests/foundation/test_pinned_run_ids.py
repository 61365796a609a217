"""Run ids pinned across the layer move (issue 14): trained end to end, public API only.

Each id below was computed by the release before nnx-core was reorganized
into layers (commit eed5ca2) for the same configuration. A trained run's id
goes through every layer that touches identity: the params and their specs
(MetricSpec, MonitorSpec, TaskSpec), the builders, the model's transform
recipes and the Trainer's plan. If one changes, existing run directories
became unfindable: fix the code, never the constant.
"""

from __future__ import annotations

import pytest
import torch

from nnx import (
    MetricSpec,
    MonitorSpec,
    Nets,
    NNConvParams,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNParams,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainParams,
    TaskSpec,
    Trainer,
    TransformRecipe,
)
from nnx.objectives import supervised_objective
from nnx.testing import sgd, tiny_loader, tiny_model


def dense(seed: int = 0, **model: object) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                   params=NNModelParams(**model))  # type: ignore[arg-type]


def train(model: NNModel, root, salt: str | None = None, **fields: object) -> str:
    fields.setdefault("optim", sgd())
    params = NNTrainParams(n_epochs=1, train_loader=tiny_loader(), **fields)  # type: ignore[arg-type]
    return model.train(params, salt=salt, verbose=False, root=root).id


def trainer_plan() -> NNTrainerParams:
    first = NNOptimParams.builder().sgd(max_lr=0.1).param_groups(
        [NNParamGroupSpec(name_pattern="layers.0.*")]).build()
    rest = NNOptimParams.builder().adamw(max_lr=1e-3).param_groups(
        [NNParamGroupSpec(name_pattern="layers.1.*")]).build()
    return (NNTrainerParams.builder().n_epochs(1).train_loader(tiny_loader())
            .optimizer("first", first).optimizer("rest", rest).build())


CASES = {
    "tiny sgd": lambda root: train(tiny_model(), root),
    "salted": lambda root: train(tiny_model(), root, salt="pinned"),
    "metrics and monitor": lambda root: train(
        tiny_model(), root, val_loader=tiny_loader(seed=1),
        metrics=(MetricSpec("accuracy"), MetricSpec("nll")),
        monitor=MonitorSpec(metric="nll", min_delta=0.001)),
    "declared task": lambda root: train(dense(task=TaskSpec.categorical(3)), root),
    "scheduler builder": lambda root: train(
        tiny_model(), root, optim=NNOptimParams.builder().adamw(max_lr=1e-3).grad_clip(1.0)
        .accumulate_grad(2).build(),
        scheduler=NNSchedulerParams.builder().linear_warmup_decay(warmup_steps=1, total_steps=4)
        .clock("optimizer_update").build()),
    "transform recipe": lambda root: train(_transformed(), root),
    "conv net": lambda root: _conv(root),
    "trainer": lambda root: Trainer(dense()).train(
        trainer_plan(), objective=supervised_objective(), verbose=False, root=root).id,
}


def _transformed() -> NNModel:
    model = dense()
    model.apply_transform(TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"], "rank": 2}))
    return model


def _conv(root) -> str:
    torch.manual_seed(0)
    net = NNConvParams(input_dim=16, output_dim=3, conv_channels=(2,), hidden_dims=(4,))
    model = NNModel(params=NNModelParams(net=Nets.CONV), net_params=net)
    images = torch.randn(8, 1, 4, 4)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(images, torch.arange(8) % 3), batch_size=4)
    params = NNTrainParams(n_epochs=1, train_loader=loader, optim=sgd())
    return model.train(params, verbose=False, root=root).id


PINNED = {
    "conv net": "6a676de369b6c2fcbe664bbc69e287ed",
    "declared task": "4406ddf824360d1be28fda87b09a1ed4",
    "metrics and monitor": "01fcd2c4735bf9a4657a272045c60d4c",
    "salted": "ea879eaaa11d1bac77ced9e0aefefe1b",
    "scheduler builder": "d89bc62be4ab275baf0559fb75b6b705",
    "tiny sgd": "7b121cbc14a5ad4a10e6e63ae992a010",
    "trainer": "112fc7ffc00f8e44591ec84b9b425c91",
    "transform recipe": "a19eacdb6c5de453bf740659a1337bac",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_run_id_of_a_trained_configuration_is_the_previous_release_s(case, tmp_path):
    assert CASES[case](tmp_path) == PINNED[case]
