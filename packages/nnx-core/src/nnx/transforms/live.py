"""A net changed in place, recognised as transform recipes (spec §11.1, §4.2).

``apply_lora_to(model.net, ...)`` changes a net after its params built it. Before a
run is reserved, :func:`live_recipes` compares the live net's module tree with the
*reference*: the net its params build (on the meta device) with the model's recorded
recipes replayed. When they differ, every registered op that is a
:class:`RecognizingTransform` is asked which configs of it reproduce its own modules
in the live net. The recipes found are replayed on the reference and accepted only
when the two trees then match exactly, so what the run records rebuilds exactly the
net it trains. Anything else is refused (:class:`LiveTopologyError`) before a run
directory exists, unless a ``salt=`` marks it as a deliberate unrecorded variant.
The refusal protects run identity (the id records the net the params describe);
a net swapped in by hand with the same modules, tensor shapes and per-module
settings (``extra_repr``: a dropout's ``p``) is that net, and trains as it.

A checkpoint written before such changes were recorded holds weights its recorded
recipes cannot rebuild: :func:`unrecorded_weights_error` asks the same ops to name
what they see in the saved keys, so ``from_checkpoint`` names the recipe to use.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import is_lazy

from nnx.transforms.recipe import TransformRecipe
from nnx.transforms.registry import (
    TransformCompatibilityError,
    TransformOp,
    registered_transforms,
    resolve_transform,
)

__all__ = ["LiveTopologyError", "RecognizingTransform", "live_recipes", "module_tree",
           "unrecorded_weights_error"]

Recognize = Callable[[nn.Module, nn.Module], Sequence[Mapping[str, Any]]]
ExplainWeights = Callable[[Sequence[str], Mapping[str, "tuple[int, ...]"]], "str | None"]
Tree = tuple[dict[str, str], dict[str, "tuple[int, ...] | str | None"], dict[str, "str | None"]]

_SHOWN = 6  # differences named in a refusal


class LiveTopologyError(ValueError):
    """The net was changed in place in a way no registered transform reproduces."""


@dataclass(frozen=True, eq=False)
class RecognizingTransform:
    """A transform op that can also find its own modules in a net changed in place.

    Register it like any op (``register_transform`` or an ``nnx.transforms`` entry
    point); calling it materializes, as the plain op does.

    * ``recognize(net, reference)`` returns the configs of this op that, replayed in
      order on ``reference`` (the net the params build, recorded recipes replayed),
      reproduce this op's modules in ``net``: only those ``reference`` does not
      already hold; ``[]`` when there are none. ValueError when they are there but
      cannot be recorded (the message says why and what to do).
    * ``explain_weights(missing, unexpected)`` (optional) reads the state-dict names a
      checkpoint lacks and the ones it has beyond the rebuilt net (name -> shape); it
      returns one line naming the recipe that rebuilds the modules it recognises
      there, or None.
    * ``recipe_api`` names the public call that builds such a recipe, for messages.
    """

    materialize: TransformOp
    recognize: Recognize
    explain_weights: ExplainWeights | None = None
    recipe_api: str = ""

    def __call__(self, net: nn.Module, config: Mapping[str, Any], *,
                 source: bool = True) -> None:
        self.materialize(net, config, source=source)


def module_tree(net: nn.Module) -> Tree:
    """``({path: class}, {state-dict name: shape}, {path: settings})``: what a replay,
    or a net swapped in by hand, must reproduce.

    The settings are each module's ``extra_repr()`` (a dropout's ``p``, a norm's
    ``eps``): the hyperparameters the run id records that no tensor shape shows, so a
    net accepted as "the net the params build" trains exactly what the id says.
    Values, dtypes and devices are not topology; a lazy module counts as the class it
    becomes, and its unmaterialized shapes and settings (None) match any.
    """
    modules, settings = {}, {}
    for path, module in net.named_modules(remove_duplicate=False):
        cls = getattr(type(module), "cls_to_become", None) or type(module)
        modules[path] = f"{cls.__module__}.{cls.__qualname__}"
        # Any: torch types the mixin's method for its own protocol, not for nn.Module.
        lazy = (isinstance(module, LazyModuleMixin)
                and bool(cast(Any, module).has_uninitialized_params()))
        settings[path] = None if lazy else module.extra_repr()
    tensors = {k: _entry_shape(v) for k, v in net.state_dict(keep_vars=True).items()}
    return modules, tensors, settings


def _entry_shape(value: Any) -> tuple[int, ...] | str | None:
    """A state entry's shape; a module's non-tensor extra state (get_extra_state) has
    none, so its type stands in: present on both sides, it matches."""
    if not isinstance(value, torch.Tensor):
        return f"<{type(value).__name__}>"
    return None if is_lazy(value) else tuple(value.shape)


def _fits(a: tuple[int, ...] | str | None, b: tuple[int, ...] | str | None) -> bool:
    return a is None or b is None or a == b  # an unmaterialized lazy entry fits any


def _same(a: Tree, b: Tree) -> bool:
    return a[0] == b[0] and all(
        a[part].keys() == b[part].keys() and all(_fits(a[part][k], b[part][k]) for k in a[part])
        for part in (1, 2))


def tree_differences(live: Tree, reference: Tree) -> list[str]:
    """What ``live`` changed over ``reference``, as ``module layers.0: A -> B``; module
    paths only when any differ (they explain the tensor names)."""
    for part, what in ((0, "module"), (1, "tensor"), (2, "setting")):
        have: Mapping[str, Any] = live[part]
        want: Mapping[str, Any] = reference[part]
        out = []
        for key, was in want.items():
            name = key or "<the net itself>"
            if key not in have:
                out.append(f"{what} {name} removed ({was})")
            elif not _fits(was, have[key]):
                out.append(f"{what} {name}: {was} -> {have[key]}")
        out += [f"{what} {key} added ({value})" for key, value in have.items()
                if key not in want]
        if out:
            return out
    return []


def _recognizers() -> list[tuple[TransformRecipe, RecognizingTransform]]:
    """The newest version of every registered op that recognises live changes, by op
    name (a deterministic order: the recipes found enter the run id)."""
    best: dict[str, tuple[TransformRecipe, RecognizingTransform]] = {}
    for op, version in registered_transforms():
        probe = TransformRecipe(op, version)
        try:
            found = resolve_transform(probe)
        except TransformCompatibilityError:  # a broken announcement recognises nothing
            continue
        if isinstance(found, RecognizingTransform) and (
                op not in best or best[op][0].version < version):
            best[op] = (probe, found)
    return [best[op] for op in sorted(best)]


def live_recipes(net: nn.Module, reference: nn.Module, *, what: str,
                 salt: str | None) -> tuple[TransformRecipe, ...]:
    """The recipes that reproduce ``net``'s in-place changes over ``reference``; () when
    it has none. The recipes found are replayed on ``reference`` (it is a scratch net).

    LiveTopologyError, naming the differences, the recipe API and ``salt=``, when no
    registered op reproduces the change; with a ``salt`` that is a RuntimeWarning
    instead and nothing is recorded (the caller trains the variant it named).
    """
    live = module_tree(net)
    if _same(live, module_tree(reference)):
        return ()
    recognizers = _recognizers()
    found: list[TransformRecipe] = []
    reasons: list[str] = []
    for probe, transform in recognizers:
        try:
            found += [TransformRecipe(probe.op, probe.version, config)
                      for config in transform.recognize(net, reference)]
        except ValueError as exc:
            reasons.append(f"{probe.label}: {exc}")
    if found and not reasons:
        try:
            for recipe in found:
                resolve_transform(recipe)(reference, recipe.config, source=False)
        except ValueError as exc:
            reasons.append(f"{recipe.label} cannot rebuild what it recognised: {exc}")
        else:
            if _same(live, module_tree(reference)):
                return tuple(found)
    differences = tree_differences(live, module_tree(reference))
    shown = "; ".join(differences[:_SHOWN]) + ("; ..." if len(differences) > _SHOWN else "")
    apis = [t.recipe_api for _, t in recognizers if t.recipe_api]
    builders = f" (recipe builders registered here: {', '.join(apis)})" if apis else ""
    why = f" ({'; '.join(reasons)})" if reasons else ""
    if salt is not None:
        warnings.warn(
            f"{what}: model.net is not the net its params build ({shown}) and no registered "
            f"transform records that change{why}; training it as salt={salt!r} records "
            f"nothing of it, so NNModel.from_checkpoint cannot rebuild this run's net",
            RuntimeWarning, stacklevel=4)
        return ()
    raise LiveTopologyError(
        f"{what}: model.net is not the net its params build ({shown}), and no registered "
        f"transform reproduces that change{why}. The refusal protects run identity: the "
        f"run id records the net the params describe, so training another one under it "
        f"would file its results as that configuration's, and NNModel.from_checkpoint "
        f"would rebuild the wrong net (a net swapped in with the same modules, shapes "
        f"and settings is accepted). To train a different net: wrap it, "
        f"NNModel(module=net, params=...), whose topology the run id records; build it "
        f"from the params, through a registered model factory (nnx.register_model_factory "
        f"and ModelSpec) or a Nets member; or make the change through a transform "
        f"recipe, model.apply_transform(recipe), with an op registered by "
        f"nnx.register_transform{builders}. Or, to train this variant unrecorded anyway, "
        f"name it with salt='...' (its checkpoints then reload only onto a net changed "
        f"the same way by hand). Nothing was reserved")


def unrecorded_weights_error(what: str, missing: Sequence[str],
                             unexpected: Mapping[str, tuple[int, ...]]
                             ) -> TransformCompatibilityError | None:
    """The error for a checkpoint whose saved weights hold modules a registered op
    recognises but its recorded recipes do not rebuild (written before in-place
    changes were recorded); None when no op recognises them."""
    answers = []
    for _, transform in _recognizers():
        if transform.explain_weights is not None:
            answer = transform.explain_weights(list(missing), dict(unexpected))
            if answer:
                answers.append(answer)
    if not answers:
        return None
    return TransformCompatibilityError(
        f"{what}: the saved weights hold modules that the checkpoint records no transform "
        f"recipe for: {'; '.join(answers)}. Its run trained a net changed in place before "
        f"NNx recorded such changes. To load it, build the model, materialize that recipe "
        f"with model.apply_transform(recipe), then call "
        f"model.net.load_state_dict(checkpoint.state_dict); a run trained that way (or, "
        f"now, on a net with the same live adapters) records the recipe and reloads "
        f"through NNModel.from_checkpoint. Nothing was loaded")
