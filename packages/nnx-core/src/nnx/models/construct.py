"""How NNModel gets its net from ``NNModelParams.net`` (spec §3.2).

* a ``Nets`` member builds from ``net_params`` on ``params.device``;
* a :class:`ModelSpec` resolves its factory first (an unknown one raises
  before anything runs), then builds seeded on ``params.device``;
* ``module=`` wraps the caller's instance itself: never cloned, no tensor or
  RNG state touched. With ``Devices.AUTO`` (the default) it stays where it is
  and the model runs on its device (CPU for a module without tensors); an
  explicit device moves it there in place (``Module.to``), so ``net is module``
  still holds. ``params.net`` becomes its :class:`RuntimeModule`.

A rebuild of a built-in net from saved weights (``NNModel.from_checkpoint``)
first builds it on the meta device (:func:`check_rebuild_fits`): shapes without storage,
so a checkpoint whose recorded configuration describes another net (a forged
``hidden_dims`` of a million units) is refused before a byte is allocated.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from nnx._foundation.seeding import capture_rng_state, restore_rng_state
from nnx.enums.devices import Devices
from nnx.enums.nets import Nets
from nnx.models.registry import MissingModelFactoryError, build_from_spec, resolve_model_factory
from nnx.models.topology import check_weights_fit, runtime_descriptor
from nnx.params.descriptors import ModelSpec, RuntimeModule

if TYPE_CHECKING:
    from nnx.params.model import NNModelParams
    from nnx.params.net import NNParams

__all__ = ["build_net", "build_reference", "check_checkpoint_module", "check_rebuild_fits"]

Built = tuple[nn.Module, "NNModelParams", torch.device]


def build_net(net_params: NNParams | None, params: NNModelParams,
              module: nn.Module | None) -> Built:
    """``(net, params, device)``: params with ``net`` filled in for a wrapped module."""
    if module is not None:
        return _wrap(net_params, params, module)
    build = _builder(net_params, params)
    device = params.device()
    return build().to(device), params, device


def _builder(net_params: NNParams | None, params: NNModelParams) -> Callable[[], nn.Module]:
    """What builds the net ``params`` describe, once everything that can be refused
    without building (an unknown factory, a missing ``net_params``) has been."""
    net = params.net
    if isinstance(net, RuntimeModule):
        raise MissingModelFactoryError(
            f"params.net describes a runtime module ({net.module}, reconstructible=False): no "
            f"factory can rebuild it; pass the instance again with NNModel(module=...)")
    if isinstance(net, ModelSpec):
        if net_params is not None:
            raise ValueError(f"a registered model ({net.label}) takes no net_params; its "
                             f"factory's config lives in the ModelSpec")
        resolve_model_factory(net)  # an unknown (id, version) raises before anything runs
        return lambda: build_from_spec(net)
    if net_params is None:
        raise ValueError(f"Nets.{net.name} needs net_params ({net.params_class.__name__})")
    if params.task is not None and params.task.num_outputs != net_params.output_dim:
        raise ValueError(
            f"the {params.task.kind} task declares {params.task.num_outputs} outputs but "
            f"net_params.output_dim is {net_params.output_dim}")
    return lambda: net(net_params)


def check_rebuild_fits(net_params: NNParams | None, params: NNModelParams,
                       state_dict: Mapping[str, torch.Tensor], what: str,
                       prepare: Callable[[nn.Module], object]) -> None:
    """Refuse (ValueError naming ``what`` and the first differing tensors) saved weights
    that do not fit the net ``params`` describe (a built-in one from ``net_params``, or
    a registered factory's), before it is allocated. For a built-in net the error is a
    :class:`~nnx.models.topology.BuiltinWeightsMismatchError`, a RuntimeError too.

    The net is built on the meta device, ``prepare`` (the transform replay) run on it,
    and its parameter and buffer names and shapes compared with ``state_dict``. Every
    RNG stream is put back afterwards, so the real build that follows initializes,
    and leaves the caller's streams, exactly as a build without this check. A
    registered factory that cannot build on the meta device (it reads a tensor's
    values while building, say) is checked after its real build instead (§3.2).
    """
    build = _builder(net_params, params)
    rng = capture_rng_state()
    try:
        with torch.device("meta"):
            skeleton = build()
            prepare(skeleton)
    except Exception:
        if not isinstance(params.net, ModelSpec):
            raise
        return  # the factory needs real tensors: compared after its real build
    finally:
        restore_rng_state(rng)
    # A built-in net's mismatch is also the RuntimeError load_state_dict would raise (§3.2).
    check_weights_fit(skeleton, state_dict, what, builtin=not isinstance(params.net, ModelSpec))


def build_reference(net_params: NNParams | None, params: NNModelParams) -> nn.Module | None:
    """The net ``params`` describe as freshly built, for comparing a live net's module
    tree with it (``NNModel.train``, spec §11.1); None for a runtime module, which no
    factory builds.

    Built on the meta device (no storage, no initialization). A registered factory
    that cannot build there is built for real instead. Every RNG stream is put back,
    so the caller's streams never move.
    """
    if isinstance(params.net, RuntimeModule):
        return None
    build = _builder(net_params, params)
    rng = capture_rng_state()
    try:
        try:
            with torch.device("meta"):
                return build()
        except Exception:
            if not isinstance(params.net, ModelSpec):
                raise
            return build()  # the factory reads real tensors while building (§3.2)
    finally:
        restore_rng_state(rng)


def _wrap(net_params: NNParams | None, params: NNModelParams, module: nn.Module) -> Built:
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module; got {type(module).__name__}")
    if net_params is not None:
        raise ValueError("pass either module= or net_params, not both")
    net = params.net
    if isinstance(net, ModelSpec) or (isinstance(net, Nets) and net is not Nets.FEED_FWD):
        raise ValueError(f"NNModel(module=...) describes the module itself; leave "
                         f"NNModelParams.net at its default (got {net!r})")
    descriptor = runtime_descriptor(module)
    if isinstance(net, RuntimeModule) and net.fingerprint != descriptor.fingerprint:
        raise ValueError(f"the module's topology differs from the recorded {net.module} "
                         f"(fingerprint {descriptor.fingerprint[:12]}… vs "
                         f"{net.fingerprint[:12]}…)")
    if params.device is Devices.AUTO:
        device = _device_of(module)
    else:
        device = params.device()
        module.to(device)  # in place: the same instance
    return module, dataclasses.replace(params, net=descriptor), device


def _device_of(module: nn.Module) -> torch.device:
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        return tensor.device
    return torch.device("cpu")


def check_checkpoint_module(net: Any, module: nn.Module | None,
                            state_dict: Mapping[str, torch.Tensor]) -> None:
    """Refuse a checkpoint reload that cannot work, before any weight is loaded.

    A runtime checkpoint needs ``module=`` (MissingModelFactoryError otherwise)
    whose topology fingerprint matches the recorded one; anything else takes
    no ``module=``.
    """
    if not isinstance(net, RuntimeModule):
        if module is not None:
            raise ValueError("module= is for checkpoints of runtime modules; this checkpoint "
                             "rebuilds its net from its own configuration")
        return
    if module is None:
        raise MissingModelFactoryError(
            f"this checkpoint holds a runtime module ({net.module}, reconstructible=False) "
            f"that no factory can rebuild; pass a fresh instance: "
            f"NNModel.from_checkpoint(ckpt, module=...)")
    found = runtime_descriptor(module)
    if found.fingerprint != net.fingerprint:
        raise ValueError(f"module= has another topology than the checkpoint's {net.module} "
                         f"({found.module}, fingerprint {found.fingerprint[:12]}… vs "
                         f"{net.fingerprint[:12]}…); nothing was loaded")
    check_weights_fit(module, state_dict, f"checkpoint of {net.module}")
