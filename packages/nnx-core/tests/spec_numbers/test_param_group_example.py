"""The spec's worked param-group example (§7 Fine-tuning): encoder.*bias, encoder.*, *.bias
give encoder.bias lr 1e-5 / wd 0, encoder.weight 1e-5 / 5e-4, head.bias 1e-3 / 0 and
head.weight 1e-3 / 5e-4; listing encoder.* before *.bias leaves every encoder bias decayed."""

from __future__ import annotations

import pytest
from _support.optimizers import EncoderHead, per_parameter, spec_example_groups

from nnx import NNOptimParams, Optims, build_optimizer


def test_first_match_wins_example_from_section_7():
    net = EncoderHead()
    optim = NNOptimParams(name=Optims.ADAM, max_lr=1e-3, weight_decay=5e-4,
                          param_groups=spec_example_groups())
    got = per_parameter(build_optimizer(net, optim), net)
    assert got == {
        "encoder.bias": (pytest.approx(1e-5), 0.0),
        "encoder.weight": (pytest.approx(1e-5), 5e-4),
        "head.bias": (1e-3, 0.0),
        "head.weight": (1e-3, 5e-4),
    }
    assert got["encoder.bias"][0] == 1e-3 * 0.01


def test_wrong_rule_order_leaves_every_encoder_bias_decayed():
    net = EncoderHead()
    optim = NNOptimParams(max_lr=1e-3, weight_decay=5e-4, param_groups=spec_example_groups("wrong"))
    got = per_parameter(build_optimizer(net, optim), net)
    assert got["encoder.bias"][1] == 5e-4  # the bias rule is never reached
    assert got["head.bias"][1] == 0.0
