"""What keeps a net's checkpoints from reloading into its own build (spec §16).

``torch.nn.utils.prune`` with its masks still attached stores ``weight_orig`` and
``weight_mask`` instead of ``weight``; a weight_norm / spectral_norm parametrization stores
``parametrizations.weight.original*`` (the legacy hooks ``weight_g`` / ``weight_v`` or
``weight_orig``). A built-in or registered net is rebuilt from its params by
``from_checkpoint``, and that build has none of those keys, so ``NNModel.train`` refuses
such a net up front (:func:`refuse_reload_blockers`) rather than write checkpoints that
cannot be read back. A wrapped module (``NNModel(module=...)``) is rebuilt from the
caller's own instance, so it may carry them.
"""

from __future__ import annotations

from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.prune import BasePruningMethod
from torch.nn.utils.spectral_norm import SpectralNorm
from torch.nn.utils.weight_norm import WeightNorm

__all__ = ["UnreloadableNetError", "refuse_reload_blockers", "reload_blockers"]

# The parametrization classes torch.nn.utils.parametrizations.weight_norm / spectral_norm
# register, by name: they are private to torch, so they are matched rather than imported.
_NORM_PARAMETRIZATIONS = {"_WeightNorm": "weight_norm", "_SpectralNorm": "spectral_norm"}


class UnreloadableNetError(ValueError):
    """A built-in or registered net still carries pruning masks or a weight_norm /
    spectral_norm parametrization (or legacy hook): its checkpoints could not be reloaded."""


def reload_blockers(net: nn.Module) -> list[str]:
    """Each ``"<module>.<tensor>: <what>"`` that changes ``net``'s state_dict keys away from
    its plain build, in module order (empty: none)."""
    found: list[str] = []
    for name, module in net.named_modules():
        where = name or "<net>"
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                found.append(f"{where}.{getattr(hook, '_tensor_name', '?')}: pruning mask")
            elif isinstance(hook, WeightNorm):
                found.append(f"{where}.{hook.name}: weight_norm (legacy hook)")
            elif isinstance(hook, SpectralNorm):
                found.append(f"{where}.{hook.name}: spectral_norm (legacy hook)")
        if parametrize.is_parametrized(module):
            for tensor, chain in module.parametrizations.items():
                for p in chain:
                    kind = _NORM_PARAMETRIZATIONS.get(type(p).__name__)
                    if kind is not None:
                        found.append(f"{where}.{tensor}: {kind} parametrization")
    return found


def refuse_reload_blockers(net: nn.Module, *, what: str) -> None:
    """Raise :class:`UnreloadableNetError` naming every blocker of ``net`` (see the module)."""
    found = reload_blockers(net)
    if found:
        raise UnreloadableNetError(
            f"{what}: the net carries what its checkpoints could not be reloaded with "
            f"({'; '.join(found)}). Remove pruning masks with torch.nn.utils.prune.remove "
            f"(or prune with nnx.prune.magnitude_prune(..., bake=True)) and parametrizations "
            f"with torch.nn.utils.parametrize.remove_parametrizations (remove_weight_norm / "
            f"remove_spectral_norm for the legacy hooks), or train it as NNModel(module=...)")
