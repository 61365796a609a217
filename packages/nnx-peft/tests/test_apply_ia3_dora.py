"""apply_ia3_to / apply_dora_to (spec §11 "Shared modules", §11.1 refusals): LoRA's
targeting rules, idempotence and modes, with a test per refusal that nothing changed."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from _peft_tiny import assert_unchanged, snapshot
from torch import nn

from nnx.peft import IA3Linear, LoRALinear, apply_lora_to
from nnx.peft.dora import DoRALinear, apply_dora_to
from nnx.peft.ia3 import apply_ia3_to

Apply = Callable[..., int]


def _ia3(net: nn.Module, *patterns: str) -> int:
    return apply_ia3_to(net, *patterns)


def _dora(net: nn.Module, *patterns: str) -> int:
    return apply_dora_to(net, *patterns, r=2, alpha=2.0)


APPLIERS = [pytest.param(_ia3, IA3Linear, "scaling", "apply_ia3_to", id="ia3"),
            pytest.param(_dora, DoRALinear, "magnitude", "apply_dora_to", id="dora")]


def mlp(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))


class Twice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4))
        self.alias = self.block
        self.other = nn.Linear(4, 4)


class Attn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2)
        self.head = nn.Linear(8, 2)


class Enc(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
        self.dec = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)
        self.head = nn.Linear(8, 2)


class Aliased(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = self.a
        self.c = nn.Linear(4, 4)


@pytest.mark.parametrize(("apply", "kind", "own", "what"), APPLIERS)
def test_globs_select_linears_and_names_gain_a_base_segment(
        apply: Apply, kind: type[nn.Module], own: str, what: str) -> None:
    net = mlp()
    assert apply(net, "0", "4") == 2
    assert isinstance(net[0], kind) and isinstance(net[4], kind) and type(net[2]) is nn.Linear
    names = [n for n, _ in net.named_parameters()]
    assert "0.base.weight" in names and "0.base.bias" in names and f"0.{own}" in names
    assert apply(net, "*") == 1  # only layer 2 is new
    trainable = {n.split(".", 1)[1] for n, p in net.named_parameters() if p.requires_grad}
    assert "base.weight" not in trainable and own in trainable


@pytest.mark.parametrize(("apply", "kind", "own", "what"), APPLIERS)
def test_reapplication_and_other_adapters_are_left_alone(
        apply: Apply, kind: type[nn.Module], own: str, what: str) -> None:
    net = mlp()
    apply_lora_to(net, "0", r=2, alpha=2.0)
    apply(net, "*")
    before = snapshot(net)
    assert apply(net, "*") == 0
    assert apply(net, "0", "4") == 0
    assert_unchanged(net, before)
    assert type(net[0]) is LoRALinear and isinstance(net[2], kind)
    assert not any(isinstance(m, kind) for m in net[0].modules())  # never nested


@pytest.mark.parametrize(("apply", "kind", "own", "what"), APPLIERS)
@pytest.mark.parametrize("pattern", ["block.0", "alias.0", "*.0"])
def test_a_shared_container_s_linear_is_wrapped_once(
        apply: Apply, kind: type[nn.Module], own: str, what: str, pattern: str) -> None:
    net = Twice()
    assert apply(net, pattern) == 1
    assert isinstance(net.block[0], kind) and net.alias[0] is net.block[0]
    assert type(net.other) is nn.Linear


@pytest.mark.parametrize(("apply", "kind", "own", "what"), APPLIERS)
@pytest.mark.parametrize(("factory", "patterns", "match"), [
    (Attn, ("head", "attn.out_proj"), r"'attn.out_proj' is the out_proj of a MultiheadAttention"),
    (Enc, ("head", "enc.linear1"), r"'enc.linear1' is the linear1 of a TransformerEncoderLayer"),
    (Enc, ("enc.linear2",), r"'enc.linear2' is the linear2 of a TransformerEncoderLayer"),
    (Enc, ("head", "dec.linear1"), r"'dec.linear1' is the linear1 of a TransformerDecoderLayer"),
    (Enc, ("dec.linear2",), r"'dec.linear2' is the linear2 of a TransformerDecoderLayer"),
])
def test_directly_read_linears_are_refused_and_nothing_changes(
        apply: Apply, kind: type[nn.Module], own: str, what: str,
        factory: type[nn.Module], patterns: tuple[str, ...], match: str) -> None:
    torch.manual_seed(0)
    net = factory()
    before = snapshot(net)
    with pytest.raises(ValueError, match=f"{what}: {match}"):
        apply(net, *patterns)
    assert_unchanged(net, before)


@pytest.mark.parametrize(("apply", "kind", "own", "what"), APPLIERS)
@pytest.mark.parametrize("patterns", [("b",), ("c", "a"), ("*",)])
def test_a_linear_under_several_names_is_refused_and_nothing_changes(
        apply: Apply, kind: type[nn.Module], own: str, what: str,
        patterns: tuple[str, ...]) -> None:
    net = Aliased()
    before = snapshot(net)
    with pytest.raises(ValueError, match=r"several names \('a', 'b'\)"):
        apply(net, *patterns)
    assert_unchanged(net, before)
    assert apply(net, "c") == 1 and type(net.a) is nn.Linear  # an unselected alias never blocks


@pytest.mark.parametrize(("apply", "kind", "own", "what"), APPLIERS)
def test_the_base_of_a_wrapper_registered_elsewhere_is_refused(
        apply: Apply, kind: type[nn.Module], own: str, what: str) -> None:
    net = mlp()
    apply(net, "0")
    net.add_module("extra", net[0].base)
    before = snapshot(net)
    with pytest.raises(ValueError, match=r"several names \('0.base', 'extra'\)"):
        apply(net, "extra", "2")
    assert_unchanged(net, before)


@pytest.mark.parametrize(("apply", "kind", "own", "what"), APPLIERS)
def test_a_pattern_selecting_nothing_and_lazy_linears_are_refused(
        apply: Apply, kind: type[nn.Module], own: str, what: str) -> None:
    net = mlp()
    before = snapshot(net)
    with pytest.raises(ValueError, match=rf"{what}: pattern\(s\) 'layers\.\*' select no"):
        apply(net, "0", "layers.*")
    with pytest.raises(ValueError, match="give at least one glob"):
        apply(net)
    assert_unchanged(net, before)
    lazy = nn.Sequential(nn.Linear(4, 4), nn.LazyLinear(3))
    with pytest.raises(ValueError, match=r"'1' is an uninitialized lazy Linear"):
        apply(lazy, "*")
    assert type(lazy[0]) is nn.Linear and lazy[0].weight.requires_grad


@pytest.mark.parametrize(("apply", "kind", "own", "what"), APPLIERS)
def test_mode_is_inherited_per_layer_and_the_model_mode_is_never_called(
        apply: Apply, kind: type[nn.Module], own: str, what: str) -> None:
    calls: list[bool] = []

    class Spy(nn.Sequential):
        def train(self, mode: bool = True) -> Spy:
            calls.append(mode)
            return super().train(mode)

    net = Spy(nn.Linear(4, 4), nn.Linear(4, 4))
    net[1].eval()
    calls.clear()
    apply(net, "*")
    assert calls == [] and net.training
    assert net[0].training and not net[1].training


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"r": 0, "alpha": 1.0}, "apply_dora_to r must be an integer >= 1"),
    ({"r": 2, "alpha": float("nan")}, r"apply_dora_to alpha must be .*> 0"),
    ({"r": 2, "alpha": float("inf")}, r"apply_dora_to alpha must be .*> 0"),
    ({"r": 2, "alpha": -1.0}, r"apply_dora_to alpha must be .*> 0"),
    ({"r": 2, "alpha": 1.0, "dropout": 1.0}, r"apply_dora_to dropout must be .*\[0, 1\)"),
])
def test_bad_dora_hyperparameters_change_nothing(kwargs: dict[str, float], match: str) -> None:
    net = mlp()
    before = snapshot(net)
    with pytest.raises(ValueError, match=match):
        apply_dora_to(net, "*", **kwargs)  # type: ignore[arg-type]
    assert_unchanged(net, before)


def test_an_eval_model_with_dropout_dora_adapters_stays_deterministic() -> None:
    net = mlp().eval()
    apply_dora_to(net, "*", r=2, alpha=2.0, dropout=0.5)
    x = torch.randn(3, 4)
    assert torch.equal(net(x), net(x))


def test_ia3_feedforward_globs_choose_input_scaling() -> None:
    net = mlp()
    assert apply_ia3_to(net, "*", feedforward=("2", "4")) == 3
    assert [m.feedforward for m in (net[0], net[2], net[4])] == [False, True, True]
    assert net[2].scaling.shape == (8,) and net[4].scaling.shape == (8,)
    assert net[0].scaling.shape == (8,)
    other = mlp()
    assert apply_ia3_to(other, "0", "4", feedforward="4") == 2  # one glob as a string
    assert not other[0].feedforward and other[4].feedforward
    # Re-applying (even with other feed-forward globs) keeps the layers as they are.
    assert apply_ia3_to(other, "0", "4", feedforward=("0",)) == 0
    assert not other[0].feedforward


@pytest.mark.parametrize(("feedforward", "match"), [
    (("3",), r"feedforward pattern\(s\) '3' match none of the layers"),
    (("4", "nope"), r"feedforward pattern\(s\) 'nope' match none"),
    ((4,), r"feedforward\[0\] must be a non-empty glob string"),
    (("",), r"feedforward\[0\] must be a non-empty glob string"),
    (4, "feedforward must be a sequence of glob strings"),
])
def test_bad_ia3_feedforward_globs_change_nothing(feedforward: object, match: str) -> None:
    net = mlp()
    before = snapshot(net)
    with pytest.raises(ValueError, match=match):
        apply_ia3_to(net, "0", "4", feedforward=feedforward)  # type: ignore[arg-type]
    assert_unchanged(net, before)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(5, 4)
        self.ff = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.ff(torch.relu(self.q(x)))
        return out


def test_apply_ia3_to_equals_hf_peft_ia3_config() -> None:
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    ours = _Block()
    theirs = peft.get_peft_model(copy.deepcopy(ours), peft.IA3Config(
        target_modules=["q", "ff"], feedforward_modules=["ff"]))
    assert apply_ia3_to(ours, "q", "ff", feedforward=["ff"]) == 2
    with torch.no_grad():
        for name in ("q", "ff"):
            mine = getattr(ours, name)
            mine.scaling.uniform_(-1.0, 2.0)
            hf = getattr(theirs.base_model.model, name).ia3_l["default"]
            hf.copy_(mine.scaling.view(hf.shape))
    x = torch.randn(6, 5)
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=1e-6)


def test_apply_dora_to_equals_hf_peft_use_dora() -> None:
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    ours = _Block()
    theirs = peft.get_peft_model(copy.deepcopy(ours), peft.LoraConfig(
        r=2, lora_alpha=4, target_modules=["q", "ff"], use_dora=True))
    assert apply_dora_to(ours, "q", "ff", r=2, alpha=4.0) == 2
    with torch.no_grad():
        for name in ("q", "ff"):
            mine = getattr(ours, name)
            mine.lora_B.weight.normal_()
            hf = getattr(theirs.base_model.model, name)
            hf.lora_A["default"].weight.copy_(mine.lora_A.weight)
            hf.lora_B["default"].weight.copy_(mine.lora_B.weight)
            # HF's magnitude is ||W|| too: the same init, untouched.
            torch.testing.assert_close(hf.lora_magnitude_vector["default"].weight,
                                       mine.magnitude, rtol=0, atol=1e-6)
    x = torch.randn(6, 5)
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=1e-6)
