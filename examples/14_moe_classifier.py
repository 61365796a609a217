"""A sparse mixture-of-experts classifier trained with its load-balancing loss (spec §10).

``Nets.MOE`` builds a feed-forward net whose hidden layers are ``MoELinear``: each
row is routed to its ``top_k`` of ``num_experts`` experts. Left alone, a router
tends to send most rows to a few experts; ``moe_train_step_factory(aux_weight=...)``
adds aux_weight × the Switch Transformer load-balancing loss of every MoE layer
(``num_experts · Σ_e f_e · P_e``, pooled over the batch's rows; 1.0 is a perfectly
even load) to the classification loss. The data are four Gaussian blobs in 8-D.
The script prints each epoch's losses, the validation accuracy and how the last
batch's rows were shared among each layer's experts, and checks that the
classifier learned the blobs while every expert kept some of the load.

    uv run python examples/14_moe_classifier.py
"""

from __future__ import annotations

import tempfile

import torch

from nnx import (
    Devices,
    Losses,
    MoELinear,
    Nets,
    NNModel,
    NNModelParams,
    NNMoEParams,
    NNOptimParams,
    NNTrainParams,
    moe_train_step_factory,
)

CLASSES, DIM = 4, 8


def blobs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    centres = 3.0 * torch.randn(CLASSES, DIM, generator=torch.Generator().manual_seed(0))
    y = torch.randint(CLASSES, (n,), generator=g)
    return centres[y] + torch.randn(n, DIM, generator=g), y


def batches(x: torch.Tensor, y: torch.Tensor, size: int) -> list[tuple[torch.Tensor, ...]]:
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def expert_load(model: NNModel, x: torch.Tensor) -> list[list[float]]:
    """Per MoE layer: the fraction of rows whose top choice is each expert."""
    loads: list[list[float]] = []
    hooks = []
    for layer in model.net.modules():
        if isinstance(layer, MoELinear):
            def record(mod: torch.nn.Module, args: tuple[torch.Tensor, ...], _: object) -> None:
                assert isinstance(mod, MoELinear)
                top = mod.router(args[0]).argmax(-1)
                counts = torch.bincount(top, minlength=mod.num_experts).float()
                loads.append((counts / counts.sum()).tolist())
            hooks.append(layer.register_forward_hook(record))
    with torch.no_grad():
        model.net.eval()
        model.net(x)
    for hook in hooks:
        hook.remove()
    return loads


def main() -> None:
    torch.manual_seed(0)
    net = NNMoEParams(input_dim=DIM, output_dim=CLASSES, hidden_dims=(16,), num_experts=4,
                      top_k=2)
    model = NNModel(net_params=net, params=NNModelParams(net=Nets.MOE, device=Devices.CPU,
                                                         loss=Losses.CROSS_ENTROPY))
    x, y = blobs(384, seed=1)
    vx, vy = blobs(256, seed=2)
    params = NNTrainParams(n_epochs=5, train_loader=batches(x, y, 64),
                           val_loader=batches(vx, vy, 128), seed=0,
                           optim=NNOptimParams.builder().adamw(max_lr=1e-2).build())
    with tempfile.TemporaryDirectory() as root:
        run = model.train(params, train_step_fn=moe_train_step_factory(aux_weight=0.1),
                          verbose=False, root=root)
        print("epoch  task loss  switch loss  val accuracy")
        for record in run.epoch_records():
            train, val = record.train_edp, record.val_edp
            assert train is not None and val is not None and val.accuracy is not None
            print(f"{record.epoch:>5}  {train.extra['task_loss']:>9.4f}  "
                  f"{train.extra['aux_loss']:>11.4f}  {val.accuracy:>12.3f}")
    accuracy = model.evaluate(batches(vx, vy, 128)).accuracy
    assert accuracy is not None and accuracy > 0.9, accuracy
    for i, load in enumerate(expert_load(model, vx)):
        print(f"MoE layer {i}: top-choice share per expert "
              + " ".join(f"{share:.2f}" for share in load))
        assert min(load) > 0.05, load  # the balancing loss kept every expert in use
    print(f"validation accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
