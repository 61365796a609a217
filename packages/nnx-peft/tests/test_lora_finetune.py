"""A LoRA fine-tune through NNModel.train (spec §11.1): the base never moves, the file is small."""

from __future__ import annotations

from pathlib import Path

import torch

from nnx import NNTrainParams
from nnx.peft import apply_lora_to, save_lora_weights
from nnx.testing import sgd, tiny_batches, tiny_model


def test_a_lora_fine_tune_changes_no_base_parameter(tmp_path: Path) -> None:
    model = tiny_model(hidden=16)
    model.train(NNTrainParams(n_epochs=2, train_loader=tiny_batches(), optim=sgd(), seed=0),
                verbose=False, root=tmp_path)  # pretraining
    assert apply_lora_to(model.net, "layers.*", r=2, alpha=4.0) == 2
    base = {n: p.detach().clone() for n, p in model.net.named_parameters() if ".base." in n}
    lora = {n: p.detach().clone() for n, p in model.net.named_parameters() if ".lora_B" in n}
    model.train(NNTrainParams(n_epochs=3, train_loader=tiny_batches(), optim=sgd(0.5), seed=1),
                verbose=False, root=tmp_path)
    named = dict(model.net.named_parameters())
    assert len(base) == 4
    assert all(torch.equal(named[n], v) for n, v in base.items())
    assert all(not torch.equal(named[n], v) for n, v in lora.items())  # the adapters learned

    path = save_lora_weights(model.net, tmp_path / "adapter.pt")
    adapter = torch.load(path, weights_only=True)
    assert sorted(adapter) == ["layers.0.lora_A.weight",
                               "layers.0.lora_B.weight", "layers.1.lora_A.weight",
                               "layers.1.lora_B.weight"]
    full = tmp_path / "full.pt"
    torch.save(model.net.state_dict(), full)
    ratio = path.stat().st_size / full.stat().st_size
    n_adapter = sum(v.numel() for v in adapter.values())
    n_full = sum(v.numel() for v in model.net.state_dict().values())
    assert n_adapter / n_full < 1 and ratio < 1


def test_freeze_and_param_groups_address_the_adapter_names(tmp_path: Path) -> None:
    from nnx import NNOptimParams, NNParamGroupSpec, Optims
    from nnx.optimizers import build_param_groups

    model = tiny_model()
    apply_lora_to(model.net, "layers.*", r=2, alpha=4.0)
    optim = NNOptimParams(name=Optims.SGD, max_lr=0.1, param_groups=[
        NNParamGroupSpec(name_pattern="*.lora_B.*", lr_multiplier=0.5)])
    groups = build_param_groups(model.net, optim)
    assert [(g["name"], g["lr"], len(g["params"])) for g in groups] == [
        ("*.lora_B.*", 0.05, 2), ("default", 0.1, 2)]
    assert model.freeze("layers.1.lora_*") == ["layers.1.lora_A.weight",
                                                "layers.1.lora_B.weight"]
    frozen_b = model.net.layers[1].lora_B.weight.detach().clone()
    model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(), optim=optim, seed=0),
                verbose=False, root=tmp_path)
    assert torch.equal(model.net.layers[1].lora_B.weight, frozen_b)
    assert torch.count_nonzero(model.net.layers[0].lora_B.weight) > 0
