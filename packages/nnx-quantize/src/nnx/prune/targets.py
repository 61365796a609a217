"""The weights nnx.prune prunes, and the up-front checks every prune shares."""

from __future__ import annotations

from torch import nn

from nnx.extend import reload_blockers
from nnx.prune.errors import PruneError

__all__ = ["PRUNABLE", "prunable_layers"]

#: The layers whose ``weight`` is pruned (biases and norm scales never are).
PRUNABLE = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def prunable_layers(net: nn.Module, *, what: str) -> list[tuple[str, nn.Module]]:
    """``(name, layer)`` for every prunable layer of ``net``, in module order; refuses a net
    with none, and one carrying masks or parametrizations (their ``weight`` is computed
    from other tensors, so pruning it would change nothing that is stored)."""
    if not isinstance(net, nn.Module):
        raise PruneError(f"{what} takes an nn.Module; got {type(net).__name__}")
    blockers = reload_blockers(net)
    if blockers:
        raise PruneError(
            f"{what}: the net still carries {'; '.join(blockers)}. Remove masks with "
            f"torch.nn.utils.prune.remove and parametrizations with "
            f"torch.nn.utils.parametrize.remove_parametrizations (remove_weight_norm / "
            f"remove_spectral_norm for the legacy hooks) first")
    layers: list[tuple[str, nn.Module]] = [
        (name, m) for name, m in net.named_modules() if isinstance(m, PRUNABLE)]
    if not layers:
        raise PruneError(f"{what}: {type(net).__name__} has no Linear / Conv weight to prune")
    return layers
