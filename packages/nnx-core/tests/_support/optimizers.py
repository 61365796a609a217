"""Helpers shared by the tests split out of engine/test_optimizers.py."""

from __future__ import annotations

import torch
from torch import nn

from nnx import NNParamGroupSpec


class EncoderHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(3, 3)
        self.head = nn.Linear(3, 2)


def single_weight(value: float) -> tuple[nn.Module, nn.Parameter]:
    module = nn.Module()
    module.w = nn.Parameter(torch.tensor([value]))
    return module, module.w


def spec_example_groups(order: str = "right") -> list[NNParamGroupSpec]:
    encoder_bias = NNParamGroupSpec(name_pattern="encoder.*bias", lr_multiplier=0.01,
                                    weight_decay=0.0)
    encoder = NNParamGroupSpec(name_pattern="encoder.*", lr_multiplier=0.01)
    bias = NNParamGroupSpec(name_pattern="*.bias", weight_decay=0.0)
    if order == "right":
        return [encoder_bias, encoder, bias]
    return [encoder, bias]


def per_parameter(opt: torch.optim.Optimizer, net: nn.Module) -> dict[str, tuple[float, float]]:
    names = {id(p): n for n, p in net.named_parameters()}
    return {names[id(p)]: (g["lr"], g["weight_decay"]) for g in opt.param_groups
            for p in g["params"]}
