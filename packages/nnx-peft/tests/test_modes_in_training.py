"""Modes of adapted models inside NNx's loop and inference helpers (spec §11 "Train/eval mode").

The inference helpers snapshot and restore every submodule's flag, wrappers included;
the built-in supervised step switches the net (adapters too) into train mode; a custom
train_step_fn that never calls train() keeps adapters injected into an eval() model in
their eval behaviour.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from nnx import NNEvaluationDataPoint, NNTrainParams
from nnx.peft import LoRALinear, apply_lora_to
from nnx.testing import sgd, tiny_batches, tiny_model


def flags(net: nn.Module) -> dict[str, bool]:
    return {name: m.training for name, m in net.named_modules()}


def adapted_eval_model():  # type: ignore[no-untyped-def]
    model = tiny_model(hidden=8)
    model.net.eval()
    assert apply_lora_to(model.net, "layers.*", r=2, alpha=4.0, dropout=0.5) == 2
    return model


def test_predict_restores_every_flag_of_a_mixed_mode_adapted_net() -> None:
    model = adapted_eval_model()
    first = next(m for m in model.net.modules() if isinstance(m, LoRALinear))
    first.train()  # mixed: one wrapper (and its dropout) in train mode, the rest eval
    before = flags(model.net)
    x = torch.randn(5, 4)
    one, two = model.predict(x).logits, model.predict(x).logits
    assert flags(model.net) == before
    assert torch.equal(one, two)  # predict runs in eval: the dropout draws nothing


def _record_modes(net: nn.Module, seen: list[bool]) -> None:
    for m in net.modules():
        if isinstance(m, LoRALinear):
            m.register_forward_hook(lambda mod, _i, _o: seen.append(mod.lora_dropout.training))


def test_the_built_in_step_trains_the_adapters_in_train_mode(tmp_path: Path) -> None:
    model = adapted_eval_model()
    seen: list[bool] = []
    _record_modes(model.net, seen)
    model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd(), seed=0),
                verbose=False, root=tmp_path)
    assert seen and all(seen)


def test_a_custom_step_that_never_calls_train_keeps_injected_adapters_in_eval(
        tmp_path: Path) -> None:
    model = adapted_eval_model()
    seen: list[bool] = []
    _record_modes(model.net, seen)

    def step(ctx):  # type: ignore[no-untyped-def]
        (x,), y = ctx.model.split_batch(ctx.batch)
        loss = nn.functional.cross_entropy(ctx.model.net(x), y)
        ctx.optimizer.zero_grad()
        loss.backward()
        ctx.optimizer.step()
        ctx.report_update()
        return NNEvaluationDataPoint(loss=float(loss))

    model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd(), seed=0),
                train_step_fn=step, verbose=False, root=tmp_path)
    assert seen and not any(seen)
