"""``nnx.low_rank`` v1: SVD low-rank replacement of explicit ``nn.Linear`` targets (§4.2).

Config: ``{"targets": ["dotted.module.name", ...], "rank": r}``. Each target
``Linear(in, out)`` becomes a :class:`LowRankLinear` whose ``up @ down`` is
the rank-``r`` truncated SVD of the original weight (exactly the weight at
``r = min(in, out)``), with the original bias. Replay (``source=False``)
builds the same shapes without an SVD and without touching any RNG stream,
because the checkpoint's weights are loaded right afterwards.

The registered op is :data:`LOW_RANK_OP`, a :class:`RecognizingTransform`: a
``LowRankLinear`` put into ``model.net`` by hand (``model.net =
low_rank_factorize(model.net, ...)``) where the net the params build holds an
``nn.Linear`` of the same in/out is recorded as this recipe when the model trains.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from nnx._foundation.validation import check_count
from nnx.transforms.live import RecognizingTransform
from nnx.transforms.recipe import config_targets

__all__ = ["LOW_RANK_OP", "LowRankLinear", "materialize_low_rank"]

_OP = "nnx.low_rank@v1"
_KEYS = {"targets", "rank"}


class LowRankLinear(nn.Module):
    """``up(down(x))``: ``down`` maps in → rank without bias, ``up`` rank → out."""

    def __init__(self, in_features: int, out_features: int, rank: int, *, bias: bool = True,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.down = nn.Linear(in_features, rank, bias=False, device=device, dtype=dtype)
        self.up = nn.Linear(rank, out_features, bias=bias, device=device, dtype=dtype)

    @property
    def in_features(self) -> int:
        return self.down.in_features

    @property
    def out_features(self) -> int:
        return self.up.out_features

    @property
    def rank(self) -> int:
        return self.down.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.up(self.down(x))
        return out


def _parse(config: Mapping[str, Any]) -> tuple[tuple[str, ...], int]:
    targets = config_targets(_OP, config, ("targets", "rank"))
    return targets, check_count(f"{_OP} rank", config["rank"])


_Target = tuple[nn.Module, str, nn.Linear]  # (parent, attribute, the Linear it holds)


def _target(net: nn.Module, name: str, rank: int, uses: Counter[int]) -> _Target:
    """``(parent, attribute, linear)`` for one target, or ValueError; changes nothing."""
    try:
        linear = net.get_submodule(name)
    except AttributeError:
        raise ValueError(f"{_OP}: the net has no module {name!r}") from None
    # Exactly nn.Linear: subclasses (LazyLinear, parametrized or quantizable
    # Linears, attention's out_proj whose weight the owner reads directly) do
    # not all run through forward, so replacing them would change the math.
    if type(linear) is not nn.Linear:
        raise ValueError(f"{_OP}: target {name!r} is a {type(linear).__name__}, not an "
                         f"nn.Linear")
    if uses[id(linear)] > 1:
        raise ValueError(f"{_OP}: target {name!r} is shared under several names; replacing "
                         f"one would untie the others")
    top = min(linear.in_features, linear.out_features)
    if rank > top:
        raise ValueError(f"{_OP}: rank {rank} is out of range for {name!r} "
                         f"({linear.in_features} → {linear.out_features}); it must be in "
                         f"[1, {top}]")
    parent_name, _, attribute = name.rpartition(".")
    return net.get_submodule(parent_name), attribute, linear


def _factors(weight: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(down, up)`` with ``up @ down`` the rank-``rank`` truncated SVD of ``weight``."""
    # float64 on the CPU: the same factors on every device, and full rank
    # reproduces the weight up to the weight dtype's own rounding.
    u, s, vh = torch.linalg.svd(weight.detach().to("cpu", torch.float64), full_matrices=False)
    root = s[:rank].sqrt()  # split the singular values evenly so both factors share the scale
    down, up = root[:, None] * vh[:rank], u[:, :rank] * root
    return down.to(weight.device, weight.dtype), up.to(weight.device, weight.dtype)


def _replacement(linear: nn.Linear, rank: int, source: bool) -> LowRankLinear:
    weight, bias = linear.weight, linear.bias
    # Built on the meta device, then given empty storage (what skip_init does):
    # no default initialization runs, so no RNG stream moves; every value is
    # either copied below or loaded from a checkpoint after replay.
    new = LowRankLinear(linear.in_features, linear.out_features, rank, bias=bias is not None,
                        device="meta", dtype=weight.dtype).to_empty(device=weight.device)
    if source:
        down, up = _factors(weight, rank)
        with torch.no_grad():
            new.down.weight.copy_(down)
            new.up.weight.copy_(up)
            if bias is not None:
                new.up.bias.copy_(bias)
    new.down.weight.requires_grad_(weight.requires_grad)
    new.up.weight.requires_grad_(weight.requires_grad)
    if bias is not None:
        new.up.bias.requires_grad_(bias.requires_grad)
    return new.train(linear.training)


def materialize_low_rank(net: nn.Module, config: Mapping[str, Any], *,
                         source: bool = True) -> None:
    """Replace every target Linear of ``net`` by its rank-``config["rank"]`` factorization."""
    targets, rank = _parse(config)
    uses = Counter(id(m) for _, m in net.named_modules(remove_duplicate=False))
    plan = [_target(net, name, rank, uses) for name in targets]
    # Build every replacement (SVD included) before the first swap: a failure
    # anywhere leaves the net exactly as it was.
    built = [(parent, attribute, _replacement(linear, rank, source))
             for parent, attribute, linear in plan]
    for parent, attribute, module in built:
        setattr(parent, attribute, module)


def recognize_low_rank(net: nn.Module, reference: nn.Module) -> list[dict[str, Any]]:
    """The ``nnx.low_rank`` configs reproducing ``net``'s own LowRankLinears: one per
    rank (read from the factors), targets in module order, at the paths where
    ``reference`` holds an ``nn.Linear`` of the same in/out (anything else is left to
    the tree check, which names it). ValueError for a factorization held under several
    names: a replay would build one per name, untying what trained tied."""
    uses = Counter(id(m) for _, m in net.named_modules(remove_duplicate=False))
    by_rank: dict[int, list[str]] = {}
    for path, module in net.named_modules():
        if type(module) is not LowRankLinear:  # exactly: a subclass may compute otherwise
            continue
        try:
            base = reference.get_submodule(path)
        except AttributeError:
            continue
        if type(base) is not nn.Linear or (base.in_features, base.out_features) != (
                module.in_features, module.out_features):
            continue
        if uses[id(module)] > 1:
            raise ValueError(f"the LowRankLinear at {path!r} is shared under several names; "
                             f"a recorded recipe would rebuild one per name")
        by_rank.setdefault(module.rank, []).append(path)
    return [{"targets": paths, "rank": rank} for rank, paths in by_rank.items()]


def explain_low_rank_weights(missing: Sequence[str],
                             unexpected: Mapping[str, tuple[int, ...]]) -> str | None:
    """Saved factors ``<p>.down.weight`` / ``<p>.up.weight`` where the rebuilt net has
    ``<p>.weight``: the recipe that rebuilds them, the rank read from ``down``."""
    lacking = set(missing)
    by_rank: dict[int, list[str]] = {}
    for key, shape in unexpected.items():
        path = key.removesuffix(".down.weight")
        if path != key and f"{path}.up.weight" in unexpected and f"{path}.weight" in lacking:
            by_rank.setdefault(shape[0], []).append(path)
    if not by_rank:
        return None
    calls = " and ".join(f"TransformRecipe('nnx.low_rank', 1, {{'targets': {paths!r}, "
                         f"'rank': {rank}}})" for rank, paths in by_rank.items())
    return f"low-rank factors, rebuilt by {calls}"


#: The ``nnx.low_rank@v1`` entry (nnx-core's pyproject): the op, recognising its own
#: LowRankLinears in a net changed in place.
LOW_RANK_OP = RecognizingTransform(
    materialize_low_rank, recognize=recognize_low_rank,
    explain_weights=explain_low_rank_weights,
    recipe_api="TransformRecipe('nnx.low_rank', 1, {'targets': [...], 'rank': r})")
