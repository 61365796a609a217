"""Which ``nn.Linear`` layers an ``apply_*_to`` call wraps (spec §11 "Shared modules").

Shared by every Linear adapter (LoRA, DoRA, IA3). The walk matches fnmatch
globs (the same as ``nnx.finetune.freeze``) against *every* registration
path (``named_modules(remove_duplicate=False)``) and groups the paths by
registration slot: the ``(parent, attribute)`` pair a wrapper replaces. A
Linear inside a container registered under several names therefore has one
slot and is wrapped once; every path then sees the same wrapper.

Adapters are recognised by ownership, not by name: every adapter wrapper
subclasses :class:`AdapterWrapper`, and nothing below one (its ``.base``, its
own small Linears) is ever a target. Selecting an already-wrapped path is a
no-op, which makes re-application idempotent.

:func:`select_linear_slots` validates the whole selection and raises before
anything changes; :func:`replace_slots` then builds every wrapper before the
first swap, so a refused call leaves module identities, weights,
``requires_grad`` flags and param-group membership exactly as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from torch import nn
from torch.nn.parameter import UninitializedParameter

__all__ = ["AdapterWrapper", "Slot", "adapter_slots", "replace_slots", "select_linear_slots"]


class AdapterWrapper(nn.Module):
    """Base of every adapter that wraps one frozen ``nn.Linear`` as ``.base``.

    The walk never descends into a wrapper, so its ``.base`` (and the
    adapter's own Linears) are never targets, and a selected wrapper path is
    a no-op.
    """

    base: nn.Linear

    @classmethod
    def check_base(cls, base: object) -> nn.Linear:
        """``base`` if it can be wrapped: TypeError for a non-Linear, ValueError for an
        uninitialized lazy Linear (its shape is unknown), before anything changes."""
        if not isinstance(base, nn.Linear):
            raise TypeError(f"{cls.__name__} wraps an nn.Linear; got {type(base).__name__}")
        if isinstance(base.weight, UninitializedParameter):
            raise ValueError(f"{cls.__name__}: the Linear is an uninitialized lazy Linear; "
                             f"run one forward to materialize it before wrapping")
        return base

    def adopt(self, base: nn.Linear) -> None:
        """Hold ``base`` frozen and take its training flag (spec §11: the mode is inherited
        per layer at insertion and set directly; ``.train()`` would reach into the base)."""
        self.base = base
        for param in base.parameters():
            param.requires_grad_(False)
        self.training = base.training

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features


# Linears their parent reads directly (weight / bias passed to a fused
# kernel, not through forward): a wrapper there would be silently bypassed.
_DIRECT_READS: tuple[tuple[type[nn.Module], frozenset[str]], ...] = (
    (nn.MultiheadAttention, frozenset({"out_proj"})),
    (nn.TransformerEncoderLayer, frozenset({"linear1", "linear2"})),
    (nn.TransformerDecoderLayer, frozenset({"linear1", "linear2"})),
)


@dataclass(frozen=True, eq=False)
class Slot:
    """One registration slot: ``parent.<attribute>`` holds ``module``.

    ``paths`` lists every dotted path that reaches the slot, in
    ``named_modules(remove_duplicate=False)`` order (the first is canonical).
    """

    parent: nn.Module
    attribute: str
    module: nn.Module
    paths: tuple[str, ...]

    @property
    def path(self) -> str:
        """The canonical (first) path."""
        return self.paths[0]


def _walk(module: nn.Module) -> list[Slot]:
    """Every slot below ``module`` (wrapper internals included), with all its paths."""
    by_path = dict(module.named_modules(remove_duplicate=False))
    slots: dict[tuple[int, str], tuple[nn.Module, str, nn.Module, list[str]]] = {}
    for path, child in by_path.items():
        if not path:
            continue
        parent_path, _, attribute = path.rpartition(".")
        parent = by_path[parent_path]
        key = (id(parent), attribute)
        if key not in slots:
            slots[key] = (parent, attribute, child, [])
        slots[key][3].append(path)
    return [Slot(p, a, m, tuple(paths)) for p, a, m, paths in slots.values()]


def _internal_paths(by_path: dict[str, nn.Module]) -> set[str]:
    """The paths that pass through an adapter wrapper (its ``.base``, its own Linears)."""
    if isinstance(by_path[""], AdapterWrapper):  # a wrapper itself: nothing below is a target
        return set(by_path) - {""}
    wrappers = {p for p, m in by_path.items() if p and isinstance(m, AdapterWrapper)}

    def below(path: str) -> bool:  # any proper ancestor path a wrapper: O(depth) per path
        parts = path.split(".")
        return any(".".join(parts[:i]) in wrappers for i in range(1, len(parts)))

    return {p for p in by_path if below(p)}


def _sample(paths: Iterable[str], n: int = 6) -> str:
    listed = list(paths)
    shown = ", ".join(repr(p) for p in listed[:n])
    return shown + (", ..." if len(listed) > n else "") if listed else "(no Linear layers)"


def select_linear_slots(module: nn.Module, patterns: Sequence[str], *, what: str,
                        exact: bool = False) -> list[Slot]:
    """The slots of the unwrapped ``nn.Linear`` layers ``patterns`` select, validated.

    ``what`` names the caller in errors (``"apply_lora_to"``). A path matches
    a pattern by ``fnmatchcase`` (``exact=True``: by equality, for a recipe's
    explicit targets). Raises ValueError, before anything changes, when:

    * no pattern is given, or one is not a non-empty string;
    * a pattern selects no Linear and no adapter wrapper (a typo);
    * ``exact`` and a target is not an unwrapped ``nn.Linear``;
    * a selected Linear is one its parent reads directly
      (``nn.MultiheadAttention.out_proj``, torch's Transformer layers'
      ``linear1`` / ``linear2``), is registered directly under several names
      (the message names every alias), or is an uninitialized lazy Linear.

    Selected adapter wrappers are skipped (idempotence); an unselected alias
    never blocks an independent target.
    """
    if not patterns:
        raise ValueError(f"{what}: give at least one glob pattern ('*' matches every Linear)")
    for i, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{what}: pattern[{i}] must be a non-empty glob string; got "
                             f"{pattern!r}")
    by_path = dict(module.named_modules(remove_duplicate=False))
    internal = _internal_paths(by_path)
    every = _walk(module)
    slots_of: dict[int, list[Slot]] = {}
    for slot in every:
        slots_of.setdefault(id(slot.module), []).append(slot)
    # A slot's candidate paths are those not passing through a wrapper.
    outside = {id(s): [p for p in s.paths if p not in internal] for s in every}
    visible = [s for s in every if outside[id(s)]]

    def selected_by(slot: Slot, pattern: str) -> bool:
        return any(p == pattern if exact else fnmatchcase(p, pattern) for p in outside[id(slot)])

    candidates = [s for s in visible if isinstance(s.module, (nn.Linear, AdapterWrapper))]
    unmatched = [p for p in patterns if not any(selected_by(s, p) for s in candidates)]
    if unmatched:
        kind = "target(s)" if exact else "pattern(s)"
        raise ValueError(f"{what}: {kind} {', '.join(map(repr, unmatched))} select no "
                         f"nn.Linear; Linear paths look like "
                         f"{_sample(s.path for s in candidates)} (an adapter's .base and its "
                         f"own layers are never targets; list every path with "
                         f"named_modules(remove_duplicate=False))")
    chosen = [s for s in candidates if any(selected_by(s, p) for p in patterns)]
    if exact:
        wrapped = [s.path for s in chosen if isinstance(s.module, AdapterWrapper)]
        if wrapped:
            raise ValueError(f"{what}: target(s) {wrapped} are already adapted; a recipe "
                             f"targets plain nn.Linear layers")
    out: list[Slot] = []
    for slot in chosen:
        if isinstance(slot.module, AdapterWrapper):
            continue
        _refuse(slot, slots_of[id(slot.module)], what)
        out.append(slot)
    return out


def _refuse(slot: Slot, same_module: list[Slot], what: str) -> None:
    for owner, attributes in _DIRECT_READS:
        if isinstance(slot.parent, owner) and slot.attribute in attributes:
            raise ValueError(
                f"{what}: {slot.path!r} is the {slot.attribute} of a {owner.__name__}, which "
                f"reads its weight directly (not through forward), so a wrapper there would "
                f"be bypassed; select other projections")
    if len(same_module) > 1:
        aliases = [p for s in same_module for p in s.paths]
        raise ValueError(
            f"{what}: the Linear at {slot.path!r} is registered directly under several names "
            f"({', '.join(map(repr, aliases))}); wrapping it would split it into independent "
            f"layers. Register the layer once, or select only unaliased layers and retry")
    linear = slot.module
    assert isinstance(linear, nn.Linear)
    if isinstance(linear.weight, UninitializedParameter):
        raise ValueError(f"{what}: {slot.path!r} is an uninitialized lazy Linear; run one "
                         f"forward to materialize its shape before wrapping it")


def replace_slots(slots: Sequence[Slot], build: Callable[[nn.Linear], nn.Module]) -> int:
    """Wrap every slot's Linear with ``build(linear)`` and return how many were wrapped.

    Every wrapper is built before the first swap. Building freezes the base,
    so should any build raise, the bases' ``requires_grad`` flags are put
    back and the error re-raised: the net is left as it was.
    """
    flags = [(p, p.requires_grad) for s in slots for p in s.module.parameters(recurse=False)]
    try:
        built = []
        for slot in slots:
            assert isinstance(slot.module, nn.Linear)
            built.append(build(slot.module))
    except BaseException:
        for param, flag in flags:
            param.requires_grad_(flag)
        raise
    for slot, wrapper in zip(slots, built, strict=True):
        setattr(slot.parent, slot.attribute, wrapper)
    return len(built)


def adapter_slots(module: nn.Module, kind: type[AdapterWrapper]) -> list[Slot]:
    """The slots holding a ``kind`` wrapper, outside any other wrapper (merging, unloading)."""
    internal = _internal_paths(dict(module.named_modules(remove_duplicate=False)))
    return [s for s in _walk(module)
            if isinstance(s.module, kind) and any(p not in internal for p in s.paths)]
