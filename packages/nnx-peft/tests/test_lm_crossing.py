"""The crossing rule: nnx-peft imports and refuses cleanly without nnx-lm.

These tests need only nnx-core: nnx-lm's absence is simulated by blocking its
import (``sys.modules["nnx.lm"] = None``), which is what an uninstalled
distribution looks like to ``import``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from nnx.extend import MissingDistributionError
from nnx.peft import PrefixTuner, PromptTuner
from nnx.peft.lm_protocol import inner_linear


def _block_nnx_lm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "nnx.lm" or m.startswith("nnx.lm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "nnx.lm", None)  # type: ignore[arg-type]


@pytest.mark.parametrize("tuner, args", [(PrefixTuner, (2,)), (PromptTuner, (2,))])
def test_without_nnx_lm_constructing_a_tuner_raises_the_one_install_hint(
        monkeypatch: pytest.MonkeyPatch, tuner: type[nn.Module], args: tuple[int]) -> None:
    _block_nnx_lm(monkeypatch)
    net = nn.Linear(3, 3)
    before = [p.requires_grad for p in net.parameters()]
    with pytest.raises(MissingDistributionError, match="pip install nnx-lm") as info:
        tuner(net, *args)
    assert isinstance(info.value, ImportError)
    assert info.value.distribution == "nnx-lm"
    assert tuner.__name__ in str(info.value)
    assert [p.requires_grad for p in net.parameters()] == before
    assert "forward" not in vars(net)


def test_nnx_peft_imports_without_nnx_lm() -> None:
    # A fresh interpreter: re-importing nnx.peft here would leave the ``nnx`` package
    # pointing at a second copy of it for every later test.
    code = (
        "import sys\n"
        "sys.modules['nnx.lm'] = None\n"
        "import nnx.peft as peft\n"
        "names = {'PrefixTuner', 'PromptTuner', 'save_prefix_weights', 'load_prefix_weights',\n"
        "         'save_prompt_weights', 'load_prompt_weights'}\n"
        "assert names <= set(peft.__all__), peft.__all__\n"
        "assert sys.modules['nnx.lm'] is None  # nothing imported it behind our back\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_with_nnx_lm_a_net_that_is_not_a_transformer_is_refused() -> None:
    pytest.importorskip("nnx.lm")
    net = nn.Linear(3, 3)
    for tuner in (PrefixTuner, PromptTuner):
        with pytest.raises(TypeError, match="TransformerNN"):
            tuner(net, 2)
        assert all(p.requires_grad for p in net.parameters())


class _Wrapper(nn.Module):
    """An adapter-shaped wrapper (as part 1's LoRALinear): a frozen ``.base`` Linear."""

    def __init__(self, base: nn.Linear) -> None:
        super().__init__()
        self.base = base
        self.delta = nn.Linear(base.in_features, base.out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.base(x) + self.delta(x)
        return out


def test_inner_linear_finds_the_base_inside_a_wrapper_and_is_the_identity_otherwise() -> None:
    linear = nn.Linear(2, 4)
    assert inner_linear(linear) is linear
    assert inner_linear(_Wrapper(linear)) is linear
    odd = nn.Module()
    odd.base = nn.ReLU()  # a `.base` that is not a Linear is not an adapter's
    assert inner_linear(odd) is odd
