"""Quantization-aware training, 8da4w (spec §16), through torchao's ``QATConfig``.

8da4w: int8 dynamic per-token activations, int4 symmetric weights in groups of
``groupsize`` input features (``Int8DynamicActivationIntxWeightConfig(weight_dtype=int4,
weight_granularity=PerGroup(groupsize))``). The lifecycle:

* ``QATLifecycleCallback.on_train_begin`` *prepares* every Linear of the net
  (``QATConfig(base, step="prepare")``): each becomes torchao's FakeQuantizedLinear
  holding the same weight and bias Parameters, so the optimizer already built keeps
  training them and every epoch checkpoint keeps the float net's state_dict names (an
  interrupted QAT run resumes like any other, the callback preparing again).
* The forward fake-quantizes activations and weights; :func:`qat_train_step_factory`'s
  step is the default step on such a net, refusing one that was not prepared.
* ``on_train_end`` of a successful run *converts* (``step="convert"``: the weights become
  IntxUnpackedToInt8Tensor, the outputs equal the fake-quantized ones) through
  ``model.apply_transform`` of the ``nnx.qat@v1`` recipe, which the callback declares in
  ``checkpoint_transforms``: the final LAST records it (its ``qat_config`` and
  ``groupsize``), so ``NNModel.from_checkpoint`` replays it (a fresh float net quantized
  with the same config) and loads the converted weights.

The op declares ``converts_at_train_end``: a bundle of such a LAST rebuilds for inference
and refuses to resume (§22); ``compile=`` refuses the callback (§28).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from nnx import Callback, TransformRecipe, default_train_step
from nnx.extend import RecognizingTransform, config_targets, reload_blockers
from nnx.quantize.errors import QuantizeError
from nnx.quantize.qat_base import (
    QAT_CONFIGS,
    QAT_OP,
    QAT_VERSION,
    base_config,
    check_config,
    prepare_qat,
)
from nnx.quantize.qat_legacy import explain_legacy_qat

__all__ = ["QAT_CONFIGS", "QAT_OP", "QAT_VERSION", "QATLifecycleCallback",
           "materialize_qat", "prepare_qat", "qat_train_step_factory"]

_KEYS = ("targets", "qat_config", "groupsize")
_LABEL = f"{QAT_OP}@v{QAT_VERSION}"


def _is_converted(module: nn.Module) -> bool:
    # torchao replaces a converted Linear's weight by a tensor subclass of its own.
    return type(getattr(module, "weight", None)).__module__.startswith("torchao")


def _torchao_module(module: nn.Module) -> bool:
    """A torchao fake-quantized module, or a module whose weight torchao converted."""
    return type(module).__module__.startswith("torchao") or _is_converted(module)


def _linear_targets(net: nn.Module, groupsize: int, what: str) -> list[str]:
    """Every Linear of ``net`` (the QAT targets), each refused unless its input features
    split into whole groups, checked before anything changes."""
    linears = [(p, m) for p, m in net.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise QuantizeError(f"{what}: {type(net).__name__} has no nn.Linear to quantize")
    converted = [p for p, m in linears if _is_converted(m)]
    if converted:
        raise QuantizeError(f"{what}: {converted} are already quantized; QAT starts from a "
                            f"float net")
    odd = [f"{p} ({m.in_features} inputs)" for p, m in linears if m.in_features % groupsize]
    if odd:
        raise QuantizeError(f"{what}: groupsize {groupsize} must divide every Linear's input "
                            f"features; it does not divide {odd}")
    return [p for p, _ in linears]


def _fake_quantized(module: nn.Module) -> bool:
    # torchao is imported on use: importing nnx.quantize stays cheap.
    from torchao.quantization.qat import FakeQuantizedLinear

    return isinstance(module, FakeQuantizedLinear)


def _materialize_qat(net: nn.Module, config: Mapping[str, Any], *, source: bool = True) -> None:
    """The ``nnx.qat@v1`` op: convert the prepared (fake-quantized) target Linears of
    ``net`` (``source=True``, at train end); on replay (``source=False``) quantize the
    fresh float targets with the same config, whose weights the checkpoint then
    overwrites. Everything is checked before the first change (ValueError)."""
    targets = config_targets(_LABEL, config, _KEYS)
    try:
        check_config(config["qat_config"], config["groupsize"])
    except QuantizeError as exc:
        raise ValueError(f"{_LABEL}: {exc}") from None
    modules = dict(net.named_modules())
    wrong = [t for t in targets if not isinstance(modules.get(t), nn.Linear)
             or modules[t].in_features % config["groupsize"] or _is_converted(modules[t])]
    if wrong:
        raise ValueError(f"{_LABEL}: targets {wrong} are not float nn.Linear layers whose "
                         f"input features split into groups of {config['groupsize']}")
    if source and not all(_fake_quantized(modules[t]) for t in targets):
        raise ValueError(f"{_LABEL}: converts a net QATLifecycleCallback prepared during "
                         f"training; train with QATLifecycleCallback(qat_config=..., "
                         f"groupsize=...) instead of applying this recipe by hand")
    from torchao.quantization import quantize_
    from torchao.quantization.qat import QATConfig

    base = base_config(config["groupsize"])
    wanted = set(targets)
    step = QATConfig(base, step="convert") if source else base
    quantize_(net, step, filter_fn=lambda _m, fqn: fqn in wanted)


def _recognize(net: nn.Module, reference: nn.Module) -> list[dict[str, Any]]:
    """A live net holding fake-quantized or converted Linears the reference lacks is
    refused: no recipe trains on a converted net (it is for inference), and a prepared
    one is QATLifecycleCallback's own, during its run. Checked by class and weight type
    names, so a run without QAT never imports torchao here."""
    ref = dict(reference.named_modules())
    # A converted net reloaded from its LAST matches its replayed reference in structure,
    # yet it differs (its weights are on a device, the reference's on meta): it is
    # refused as well, because a converted net is never trained.
    found = [p for p, m in net.named_modules()
             if _torchao_module(m) and (_is_converted(m) or not (
                 p in ref and _torchao_module(ref[p])))]
    if found:
        raise ValueError(f"{found} are fake-quantized or quantized in place (torchao): a "
                         f"quantized net is for inference, and QAT trains the float net with "
                         f"callbacks=[QATLifecycleCallback(qat_config=..., groupsize=...)]")
    return []


class _QATTransform(RecognizingTransform):
    # Read by bundle export: a bundle of a LAST this op converted does not resume (§22).
    converts_at_train_end = True


materialize_qat = _QATTransform(_materialize_qat, recognize=_recognize,
                                explain_weights=explain_legacy_qat,
                                recipe_api="QATLifecycleCallback")


class QATLifecycleCallback(Callback):
    """Fake-quantize (8da4w) every Linear during training; convert on commit, recording
    the ``nnx.qat`` recipe in the final LAST. See the module docstring."""

    checkpoint_transforms = (QAT_OP,)

    def __init__(self, *, qat_config: str = "8da4w", groupsize: int = 32) -> None:
        check_config(qat_config, groupsize)
        self.qat_config, self.groupsize = qat_config, groupsize

    def check_model(self, model: Any) -> None:
        net = model.net
        what = "QATLifecycleCallback"
        blockers = reload_blockers(net)
        if blockers:
            raise QuantizeError(f"{what}: remove these first ({'; '.join(blockers)})")
        if any(_fake_quantized(m) for m in net.modules()):
            raise QuantizeError(f"{what}: the net is already prepared for QAT")
        _linear_targets(net, self.groupsize, what)

    def on_train_begin(self, ctx: Any) -> None:
        net = ctx.model.net
        prepare_qat(net, self.groupsize,
                    _linear_targets(net, self.groupsize, "QATLifecycleCallback"))

    def on_train_end(self, ctx: Any) -> None:
        net = ctx.model.net
        if ctx.error is not None:  # a failed run leaves the float net it trained
            _unprepare(net)
            return
        targets = [p for p, m in net.named_modules() if _fake_quantized(m)]
        ctx.model.apply_transform(TransformRecipe(QAT_OP, QAT_VERSION, {
            "targets": targets, "qat_config": self.qat_config, "groupsize": self.groupsize}))


def _unprepare(net: nn.Module) -> None:
    for path, module in list(net.named_modules()):
        if _fake_quantized(module):
            parent, _, name = path.rpartition(".")
            setattr(net.get_submodule(parent), name, module.to_linear())


def qat_train_step_factory(*, qat_config: str = "8da4w", groupsize: int = 32
                           ) -> Callable[[Any], Any]:
    """The QAT train step: the default step on a net a ``QATLifecycleCallback`` with the
    same ``qat_config`` and ``groupsize`` prepared. It refuses (QuantizeError) a net with
    no fake-quantized Linear or another groupsize, before its first update."""
    check_config(qat_config, groupsize)

    def qat_train_step(ctx: Any) -> Any:
        _check_prepared(ctx.model.net, groupsize)
        return default_train_step(ctx)

    return qat_train_step


def _check_prepared(net: nn.Module, groupsize: int) -> None:
    prepared: list[Any] = [m for m in net.modules() if _fake_quantized(m)]
    if not prepared:
        raise QuantizeError("qat_train_step: the net is not fake-quantized; pass "
                            "callbacks=[QATLifecycleCallback(qat_config=..., groupsize=...)]")
    sizes = {getattr(m.weight_fake_quantizer.config.granularity, "group_size", None)
             for m in prepared}
    if set(sizes) != {groupsize}:
        raise QuantizeError(f"qat_train_step: the step's groupsize {groupsize} differs from "
                            f"the callback's {sorted(sizes, key=str)}")
