"""apply_lora_to (spec §11, §11.1, §7): matching by slot, idempotence, refusals, modes."""

from __future__ import annotations

import pytest
import torch
from _peft_tiny import assert_unchanged, snapshot
from torch import nn

from nnx.finetune import freeze
from nnx.peft import LoRALinear, apply_lora_to
from nnx.peft.targeting import replace_slots, select_linear_slots


def mlp(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))


def test_globs_select_linears_and_the_count_is_new_wrappers() -> None:
    net = mlp()
    assert apply_lora_to(net, "0", "4", r=2, alpha=4.0) == 2
    assert isinstance(net[0], LoRALinear) and isinstance(net[4], LoRALinear)
    assert type(net[2]) is nn.Linear
    assert apply_lora_to(net, "*", r=2, alpha=4.0) == 1  # only layer 2 is new


def test_parameter_names_gain_a_base_segment() -> None:
    net = mlp()
    apply_lora_to(net, "0", r=2, alpha=4.0)
    names = [n for n, _ in net.named_parameters()]
    assert names[:4] == ["0.base.weight", "0.base.bias", "0.lora_A.weight", "0.lora_B.weight"]
    assert net[0].base.weight is net.get_parameter("0.base.weight")


def test_reapplication_is_a_no_op_and_the_base_is_excluded_from_the_walk() -> None:
    net = mlp()
    apply_lora_to(net, "*", r=2, alpha=4.0)
    before = snapshot(net)
    # "*" also matches 0.base, 0.lora_A, 0.lora_B by name: they are never targets.
    assert apply_lora_to(net, "*", r=2, alpha=4.0) == 0
    assert apply_lora_to(net, "0", "4", r=8, alpha=1.0) == 0
    with pytest.raises(ValueError, match=r"'\*\.base' select no nn.Linear.*\.base and its own "
                                         r"layers are never targets"):
        apply_lora_to(net, "*.base", r=2, alpha=4.0)
    assert_unchanged(net, before)
    assert not any(isinstance(m.base, LoRALinear) for m in net if isinstance(m, LoRALinear))


def test_a_pattern_selecting_no_linear_is_refused_before_anything_changes() -> None:
    net = mlp()
    before = snapshot(net)
    with pytest.raises(ValueError, match=r"pattern\(s\) 'layers\.\*' select no nn.Linear; "
                                         r"Linear paths look like '0', '2', '4'"):
        apply_lora_to(net, "0", "layers.*", r=2, alpha=4.0)
    with pytest.raises(ValueError, match=r"pattern\(s\) '1' select no nn.Linear"):
        apply_lora_to(net, "1", r=2, alpha=4.0)  # a ReLU
    with pytest.raises(ValueError, match="give at least one glob"):
        apply_lora_to(net, r=2, alpha=4.0)
    with pytest.raises(ValueError, match=r"pattern\[0\] must be a non-empty glob"):
        apply_lora_to(net, "", r=2, alpha=4.0)
    assert_unchanged(net, before)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"r": 0, "alpha": 1.0}, "apply_lora_to r must be an integer >= 1"),
    ({"r": 2, "alpha": float("nan")}, r"apply_lora_to alpha must be .*> 0"),
    ({"r": 2, "alpha": 0}, r"apply_lora_to alpha must be .*> 0"),
    ({"r": 2, "alpha": 1.0, "dropout": 1.0}, r"apply_lora_to dropout must be .*\[0, 1\)"),
])
def test_bad_hyperparameters_change_nothing(kwargs: dict[str, float], match: str) -> None:
    net = mlp()
    before = snapshot(net)
    with pytest.raises(ValueError, match=match):
        apply_lora_to(net, "*", **kwargs)  # type: ignore[arg-type]
    assert_unchanged(net, before)


class Twice(nn.Module):
    """One container registered under two names: its Linear has one slot."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4))
        self.alias = self.block
        self.other = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.other(self.alias(self.block(x)))


@pytest.mark.parametrize("pattern", ["block.0", "alias.0", "*.0"])
def test_a_shared_container_s_linear_is_matched_by_any_path_and_wrapped_once(
        pattern: str) -> None:
    net = Twice()
    assert apply_lora_to(net, pattern, r=2, alpha=2.0) == 1
    assert isinstance(net.block[0], LoRALinear) and net.alias[0] is net.block[0]
    assert type(net.other) is nn.Linear
    slots = select_linear_slots(net, ["*"], what="t")
    assert [s.paths for s in slots] == [("other",)]


def test_slots_list_every_path_of_a_shared_container() -> None:
    (slot,) = select_linear_slots(Twice(), ["alias.*"], what="t")
    assert slot.paths == ("block.0", "alias.0") and slot.attribute == "0"


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


@pytest.mark.parametrize(("factory", "patterns", "match"), [
    (Attn, ("head", "attn.out_proj"), r"'attn.out_proj' is the out_proj of a MultiheadAttention"),
    (Attn, ("*",), r"'attn.out_proj' is the out_proj of a MultiheadAttention"),
    (Enc, ("head", "enc.linear1"), r"'enc.linear1' is the linear1 of a TransformerEncoderLayer"),
    (Enc, ("enc.linear2",), r"'enc.linear2' is the linear2 of a TransformerEncoderLayer"),
    (Enc, ("dec.linear1",), r"'dec.linear1' is the linear1 of a TransformerDecoderLayer"),
    (Enc, ("head", "dec.linear2"), r"'dec.linear2' is the linear2 of a TransformerDecoderLayer"),
])
def test_directly_read_linears_are_refused_and_nothing_changes(
        factory: type[nn.Module], patterns: tuple[str, ...], match: str) -> None:
    torch.manual_seed(0)
    net = factory()
    before = snapshot(net)
    with pytest.raises(ValueError, match=match):
        apply_lora_to(net, *patterns, r=2, alpha=2.0)
    assert_unchanged(net, before)


class Aliased(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = self.a
        self.c = nn.Linear(4, 4)


@pytest.mark.parametrize("patterns", [("a",), ("b",), ("c", "b"), ("*",)])
def test_a_linear_under_several_names_is_refused_naming_every_alias(
        patterns: tuple[str, ...]) -> None:
    net = Aliased()
    before = snapshot(net)
    with pytest.raises(ValueError, match=r"registered directly under several names "
                                         r"\('a', 'b'\).*Register the layer once"):
        apply_lora_to(net, *patterns, r=2, alpha=2.0)
    assert_unchanged(net, before)


def test_an_unselected_alias_never_blocks_an_independent_target() -> None:
    net = Aliased()
    assert apply_lora_to(net, "c", r=2, alpha=2.0) == 1
    assert type(net.a) is nn.Linear and net.a is net.b and isinstance(net.c, LoRALinear)


def test_the_base_of_a_wrapper_registered_elsewhere_is_an_alias() -> None:
    net = mlp()
    apply_lora_to(net, "0", r=2, alpha=2.0)
    net.add_module("extra", net[0].base)
    before = snapshot(net)
    with pytest.raises(ValueError, match=r"several names \('0.base', 'extra'\)"):
        apply_lora_to(net, "extra", "2", r=2, alpha=2.0)
    assert_unchanged(net, before)
    assert apply_lora_to(net, "2", r=2, alpha=2.0) == 1  # independent target still fine


def test_lazy_uninitialized_linears_are_refused_before_anything_changes() -> None:
    net = nn.Sequential(nn.Linear(4, 4), nn.LazyLinear(3))
    before = [p.requires_grad for p in net[0].parameters()]
    with pytest.raises(ValueError, match=r"'1' is an uninitialized lazy Linear"):
        apply_lora_to(net, "*", r=2, alpha=2.0)
    assert type(net[0]) is nn.Linear and [p.requires_grad for p in net[0].parameters()] == before


def test_mode_is_inherited_per_layer_and_the_model_mode_is_never_called() -> None:
    calls: list[bool] = []

    class Spy(nn.Sequential):
        def train(self, mode: bool = True) -> Spy:
            calls.append(mode)
            return super().train(mode)

    torch.manual_seed(0)
    net = Spy(nn.Linear(4, 4), nn.Linear(4, 4))
    net.train()
    net[1].eval()
    calls.clear()
    apply_lora_to(net, "*", r=2, alpha=2.0, dropout=0.3)
    assert calls == []
    assert net.training and net[0].training and net[0].lora_dropout.training
    assert not net[1].training and not net[1].lora_dropout.training
    assert not net[1].base.training and net[0].base.training


def test_an_eval_model_with_dropout_adapters_stays_deterministic() -> None:
    net = mlp().eval()
    apply_lora_to(net, "*", r=2, alpha=2.0, dropout=0.5)
    for m in net:
        if isinstance(m, LoRALinear):
            nn.init.normal_(m.lora_B.weight)
    x = torch.randn(6, 4)
    assert torch.equal(net(x), net(x))


def test_param_groups_train_only_the_adapters_after_wrapping() -> None:
    """§11.1: "Optimizer sees all params, but the frozen ones don't move"."""
    from nnx import NNOptimParams
    from nnx.optimizers import build_param_groups

    net = mlp()
    apply_lora_to(net, "0", "2", r=2, alpha=2.0)
    (group,) = build_param_groups(net, NNOptimParams.builder().sgd(max_lr=0.1).build())
    assert [id(p) for p in group["params"]] == [id(p) for p in net.parameters()]
    expected = [net[0].lora_A.weight, net[0].lora_B.weight, net[2].lora_A.weight,
                net[2].lora_B.weight, net[4].weight, net[4].bias]
    trainable = [p for p in group["params"] if p.requires_grad]
    assert [id(p) for p in trainable] == [id(p) for p in expected]


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight  # tied tensor, distinct modules

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.embed(ids))
        return out


def test_wrapping_a_tied_head_freezes_the_shared_embedding_too() -> None:
    net = Tied()
    assert apply_lora_to(net, "head", r=2, alpha=2.0) == 1  # not an alias: distinct modules
    assert net.head.base.weight is net.embed.weight
    assert not net.embed.weight.requires_grad
    net(torch.tensor([[1, 2, 3]])).sum().backward()
    assert net.embed.weight.grad is None and net.head.lora_B.weight.grad is not None


def test_freeze_globs_and_lora_globs_agree_on_the_base_segment() -> None:
    net = mlp()
    apply_lora_to(net, "0", r=2, alpha=2.0)
    assert freeze(net, "0.lora_*") == ["0.lora_A.weight", "0.lora_B.weight"]


def test_a_failing_build_restores_the_bases_flags() -> None:
    net = mlp()
    slots = select_linear_slots(net, ["*"], what="t")
    seen: list[nn.Linear] = []

    def build(linear: nn.Linear) -> nn.Module:
        if seen:
            raise RuntimeError("boom")
        seen.append(linear)
        return LoRALinear(linear, 2, 2.0)

    before = snapshot(net)
    with pytest.raises(RuntimeError, match="boom"):
        replace_slots(slots, build)
    assert_unchanged(net, before)


def test_exact_targets_are_literal_paths_of_unwrapped_linears() -> None:
    net = mlp()
    assert [s.path for s in select_linear_slots(net, ["0", "4"], what="t", exact=True)] == [
        "0", "4"]
    with pytest.raises(ValueError, match=r"target\(s\) '\*' select no nn.Linear"):
        select_linear_slots(net, ["*"], what="t", exact=True)
    apply_lora_to(net, "0", r=2, alpha=2.0)
    with pytest.raises(ValueError, match=r"\['0'\] are already adapted"):
        select_linear_slots(net, ["0"], what="t", exact=True)


def test_a_wrapper_itself_offers_no_targets() -> None:
    lora = LoRALinear(nn.Linear(4, 4), 2, 2.0)
    with pytest.raises(ValueError, match=r"select no nn\.Linear"):
        apply_lora_to(lora, "*", r=2, alpha=2.0)
