"""QAT 8da4w (spec §16, §22, §28): fake-quant during training, convert on commit, the
converted LAST records the nnx.qat recipe (qat_config, groupsize) and reloads through
NNModel.from_checkpoint; bundles of it refuse to resume; compile= refuses the callback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from nnx import Devices, NNCheckpoint, NNModel, NNModelParams, NNParams
from nnx.compilation import CompileScopeError, CompileSpec
from nnx.quantize import QATLifecycleCallback, QuantizeError, qat_train_step_factory
from nnx.testing import sgd, tiny_train_params

G = 8


def _data() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 16, generator=g)
    y = x[:, :3].argmax(dim=1)
    return [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]


def _model() -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNParams(input_dim=16, output_dim=3, hidden_dims=(32,)),
                   params=NNModelParams(device=Devices.CPU))


def _params(n_epochs: int = 2, **fields):
    return tiny_train_params(_data(), n_epochs=n_epochs, optim=sgd(0.05), **fields)


def _qat_run(root: Path, model: NNModel | None = None):
    model = model or _model()
    run = model.train(_params(), callbacks=[QATLifecycleCallback(qat_config="8da4w",
                                                                 groupsize=G)],
                      train_step_fn=qat_train_step_factory(groupsize=G), root=root,
                      verbose=False)
    return model, run


def _weight_types(net: nn.Module) -> set[str]:
    return {type(m.weight).__name__ for m in net.modules() if isinstance(m, nn.Linear)}


def test_a_qat_run_trains_converts_and_reloads_from_last(tmp_path: Path) -> None:
    model = _model()
    before = model.net.layers[0].weight.detach().clone()
    model, run = _qat_run(tmp_path, model)
    assert _weight_types(model.net) == {"IntxUnpackedToInt8Tensor"}
    last = NNCheckpoint.load(run.id, "last", root=tmp_path)
    (recipe,) = last.transforms
    assert recipe["op"] == "nnx.qat" and recipe["config"]["qat_config"] == "8da4w"
    assert recipe["config"]["groupsize"] == G
    restored = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert _weight_types(restored.net) == {"IntxUnpackedToInt8Tensor"}
    x = torch.randn(5, 16)
    assert torch.equal(restored.predict(x).logits, model.predict(x).logits)
    # it trained: the first layer's dequantized weights moved off the initial float ones
    assert not torch.allclose(restored.net.layers[0].weight.dequantize(), before, atol=1e-2)
    # the converted model is for inference: training it (or resuming it) is refused
    from nnx.transforms import LiveTopologyError

    for converted in (restored, model):
        with pytest.raises(LiveTopologyError, match="quantized net is for inference"):
            converted.train(_params(1), root=tmp_path / "again", verbose=False)
    assert not (tmp_path / "again").exists()


def test_the_converted_output_equals_the_fake_quantized_one(tmp_path: Path) -> None:
    seen = {}

    class Probe(QATLifecycleCallback):
        def on_train_end(self, ctx):
            with torch.no_grad():
                seen["fake"] = ctx.model.net.eval()(seen["x"])
            super().on_train_end(ctx)

    seen["x"] = torch.randn(5, 16)
    model = _model()
    model.train(_params(), callbacks=[Probe(groupsize=G)], root=tmp_path, verbose=False)
    with torch.no_grad():
        assert torch.equal(model.net.eval()(seen["x"]), seen["fake"])


def test_epoch_checkpoints_stay_float_and_a_resume_of_the_converted_last_is_refused(
        tmp_path: Path) -> None:
    _, run = _qat_run(tmp_path)
    best = NNCheckpoint.load(run.id, "best", root=tmp_path)
    assert best.transforms == () and best.state_dict["layers.0.weight"].dtype == torch.float32
    with pytest.raises(ValueError, match="materialize the same recipes"):
        _model().train(_params(1, resume_from_run_id=run.id, resume_mode="stateful"),
                       callbacks=[QATLifecycleCallback(groupsize=G)], root=tmp_path,
                       verbose=False)


def test_a_bundle_of_a_converted_last_rebuilds_for_inference_and_refuses_to_resume(
        tmp_path: Path) -> None:
    # Spec §22: the converted weights (torchao tensor subclasses) are stored as their plain
    # inner tensors; reconstruct replays the nnx.qat recipe and predicts bit for bit like
    # the source; resume() is refused with BundleCapabilityError before anything changes.
    import json

    from safetensors.torch import load_file

    from nnx.bundles import (
        BundleCapabilityError,
        export_bundle,
        inspect_bundle,
        reconstruct_bundle,
        validate_bundle,
    )

    model, run = _qat_run(tmp_path / "runs")
    info = export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    assert info.capability == "resume"
    validate_bundle(tmp_path / "b")
    generation = next(p for p in (tmp_path / "b").iterdir() if p.is_dir())
    state = json.loads((generation / "state.json").read_text())
    flat = state["flattened_weights"]["layers.0.weight"]
    assert flat["type"].endswith("IntxUnpackedToInt8Tensor") and flat["size"] == [32, 16]
    assert sorted(flat["inner"]) == ["qdata", "scale", "zero_point"]
    stored = load_file(generation / "model.safetensors")  # any safetensors reader opens it
    live = model.net.layers[0].weight
    assert torch.equal(stored["layers.0.weight#qdata"], live.qdata)
    assert torch.equal(stored["layers.0.weight#scale"], live.scale)

    rebuilt = reconstruct_bundle(tmp_path / "b")
    assert _weight_types(rebuilt.model.net) == {"IntxUnpackedToInt8Tensor"}
    x = torch.randn(8, 16)
    assert torch.equal(rebuilt.model.predict(x).logits, model.predict(x).logits)
    assert inspect_bundle(tmp_path / "b").source_run == run.id

    before = sorted(p.name for p in (tmp_path / "runs").iterdir())
    with pytest.raises(BundleCapabilityError, match="converted the topology at train end"):
        rebuilt.resume(_params(3))
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == before


def test_a_bundle_whose_quantized_weights_do_not_fit_the_recipe_is_refused(
        tmp_path: Path) -> None:
    # The type and metadata come from the replayed recipe, never from the bundle: a stored
    # entry whose metadata differs from the rebuilt template is refused, nothing loaded.
    import hashlib
    import json

    from nnx.bundles import BundleValidationError, export_bundle, reconstruct_bundle

    _, run = _qat_run(tmp_path / "runs")
    export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    generation = next(p for p in (tmp_path / "b").iterdir() if p.is_dir())
    state_path = generation / "state.json"
    state = json.loads(state_path.read_text())
    state["flattened_weights"]["layers.0.weight"]["meta"] = "{'block_size': (1, 4)}"
    data = json.dumps(state, sort_keys=True, indent=1).encode()
    state_path.write_bytes(data)
    manifest_path = tmp_path / "b" / "bundle.json"
    manifest = json.loads(manifest_path.read_text())
    entry = manifest["files"][f"{generation.name}/state.json"]
    entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(BundleValidationError, match="do not fit the net"):
        reconstruct_bundle(tmp_path / "b")


def test_compile_refuses_the_callback_before_a_run_is_reserved(tmp_path: Path) -> None:
    model = _model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    with pytest.raises(CompileScopeError, match="QATLifecycleCallback"):
        model.train(_params(), callbacks=[QATLifecycleCallback(groupsize=G)],
                    compile=CompileSpec(backend="eager"), root=tmp_path, verbose=False)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    assert all(torch.equal(v, model.net.state_dict()[k]) for k, v in before.items())


@pytest.mark.parametrize("kwargs, match", [
    ({"qat_config": "4w"}, "qat_config"), ({"groupsize": 0}, "groupsize"),
    ({"groupsize": 5}, "does not divide")])
def test_refusals_before_a_run_is_reserved(tmp_path: Path, kwargs, match) -> None:
    model = _model()
    with pytest.raises(QuantizeError, match=match):
        model.train(_params(), callbacks=[QATLifecycleCallback(**kwargs)], root=tmp_path,
                    verbose=False)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    assert _weight_types(model.net) == {"Parameter"}


def test_the_step_refuses_a_net_no_callback_prepared(tmp_path: Path) -> None:
    model = _model()
    with pytest.raises(QuantizeError, match="QATLifecycleCallback"):
        model.train(_params(), train_step_fn=qat_train_step_factory(groupsize=G),
                    root=tmp_path, verbose=False)
    with pytest.raises(QuantizeError, match="groupsize"):
        _model().train(_params(), callbacks=[QATLifecycleCallback(groupsize=16)],
                       train_step_fn=qat_train_step_factory(groupsize=G),
                       root=tmp_path / "g", verbose=False)


def test_a_failed_run_leaves_the_float_net(tmp_path: Path) -> None:
    def boom(ctx):
        raise RuntimeError("boom")

    model = _model()
    with pytest.raises(RuntimeError, match="boom"):
        model.train(_params(), callbacks=[QATLifecycleCallback(groupsize=G)],
                    train_step_fn=boom, root=tmp_path, verbose=False)
    assert {type(m).__name__ for m in model.net.modules() if isinstance(m, nn.Linear)} == {
        "Linear"} and model.transforms == ()


def test_applying_the_recipe_by_hand_is_refused_before_anything_changes() -> None:
    from nnx import TransformRecipe

    model = _model()
    recipe = TransformRecipe("nnx.qat", 1, {"targets": ["layers.0"], "qat_config": "8da4w",
                                            "groupsize": G})
    with pytest.raises(ValueError, match="QATLifecycleCallback"):
        model.apply_transform(recipe)
    assert model.transforms == () and _weight_types(model.net) == {"Parameter"}


def _legacy(state_dict: dict[str, torch.Tensor], groupsize: int) -> dict[str, torch.Tensor]:
    """The layout torchao's removed Int8DynActInt4WeightLinear saved (weight int8 in the
    int4 range, scales and zeros per group), built from float weights: symmetric int4."""
    out = dict(state_dict)
    for key in [k for k in state_dict if k.endswith(".weight")]:
        w = state_dict[key].float()
        grouped = w.reshape(w.shape[0], -1, groupsize)
        scales = grouped.abs().amax(dim=2).clamp(min=1e-6) / 7.5
        q = torch.clamp(torch.round(grouped / scales[..., None]), -8, 7)
        layer = key[:-len(".weight")]
        out[key] = q.reshape(w.shape).to(torch.int8)
        out[f"{layer}.scales"], out[f"{layer}.zeros"] = scales, torch.zeros_like(scales)
    return out


def test_a_legacy_converted_checkpoint_gets_a_targeted_migration_error_then_migrates(
        tmp_path: Path) -> None:
    import dataclasses

    from nnx import TransformCompatibilityError
    from nnx.quantize import migrate_legacy_qat

    run = _model().train(_params(), root=tmp_path / "runs", verbose=False)
    float_ckpt = NNCheckpoint.load(run.id, "last", root=tmp_path / "runs")
    legacy = dataclasses.replace(float_ckpt, state_dict=_legacy(dict(float_ckpt.state_dict), G),
                                 path=None)
    legacy.save(tmp_path / "legacy.pt")
    with pytest.raises(TransformCompatibilityError, match="legacy QAT-converted checkpoint"
                       ) as err:
        NNModel.from_checkpoint(tmp_path / "legacy.pt")
    assert "migrate_legacy_qat" in str(err.value) and "layers.0" in str(err.value)

    migrated = migrate_legacy_qat(tmp_path / "legacy.pt", tmp_path / "migrated.pt")
    (recipe,) = migrated.transforms
    assert recipe["config"] == {"targets": ["layers.0", "layers.1"], "qat_config": "8da4w",
                                "groupsize": G}
    restored = NNModel.from_checkpoint(tmp_path / "migrated.pt")
    assert _weight_types(restored.net) == {"IntxUnpackedToInt8Tensor"}
    # re-quantized by the current 8da4w config: each weight stays within one legacy step
    # (torchao's current symmetric int4 scale differs from the legacy one, so not equal)
    for layer in ("layers.0", "layers.1"):
        step = legacy.state_dict[f"{layer}.scales"].repeat_interleave(G, dim=1)
        old = legacy.state_dict[f"{layer}.weight"].float() * step
        new = restored.net.get_submodule(layer).weight.dequantize()
        assert bool(((new - old).abs() <= step + 1e-6).all())
    with pytest.raises(QuantizeError, match="already records"):
        migrate_legacy_qat(tmp_path / "migrated.pt", tmp_path / "again.pt")
    with pytest.raises(QuantizeError, match="no legacy QAT layer"):
        migrate_legacy_qat(float_ckpt, tmp_path / "plain.pt")
    assert not (tmp_path / "again.pt").exists() and not (tmp_path / "plain.pt").exists()


def test_training_a_converted_net_in_place_is_refused(tmp_path: Path) -> None:
    from nnx.quantize.qat_base import prepare_qat
    from nnx.transforms import LiveTopologyError

    model = _model()
    prepare_qat(model.net, G, ["layers.0"])
    with pytest.raises(LiveTopologyError, match="fake-quantized or quantized in place"):
        model.train(_params(), root=tmp_path, verbose=False)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_an_interrupted_qat_run_resumes_from_its_float_last_and_converts(
        tmp_path: Path) -> None:
    from nnx import Callback

    class StopAfterFirstEpoch(Callback):
        def on_epoch_end(self, ctx):
            if ctx.epoch == 1:
                raise KeyboardInterrupt

    _, straight = _qat_run(tmp_path / "a")
    with pytest.raises(KeyboardInterrupt):
        _model().train(_params(), callbacks=[QATLifecycleCallback(groupsize=G),
                                             StopAfterFirstEpoch()],
                       train_step_fn=qat_train_step_factory(groupsize=G),
                       root=tmp_path / "b", verbose=False)
    (first,) = [p.parent.parent.name for p in (tmp_path / "b").rglob("last.pt")]
    interrupted = NNCheckpoint.load(first, "last", root=tmp_path / "b")
    assert interrupted.transforms == () and interrupted.epoch == 0
    resumed = _model().train(_params(1, resume_from_run_id=first, resume_mode="stateful"),
                             callbacks=[QATLifecycleCallback(groupsize=G)],
                             train_step_fn=qat_train_step_factory(groupsize=G),
                             root=tmp_path / "b", verbose=False)
    a = NNCheckpoint.load(straight.id, "last", root=tmp_path / "a")
    b = NNCheckpoint.load(resumed.id, "last", root=tmp_path / "b")
    assert a.transforms == b.transforms and len(b.transforms) == 1
    for key, value in a.state_dict.items():
        other = b.state_dict[key]
        if hasattr(value, "qdata"):
            assert torch.equal(value.qdata, other.qdata)
            assert torch.equal(value.scale, other.scale)
        else:
            assert torch.equal(value, other)


def test_a_calibrator_bound_to_the_converted_model_ships_in_its_bundle(tmp_path: Path) -> None:
    # The fingerprint of a converted net hashes the inner tensors its bundle stores, so a
    # calibrator bound to the live model validates against the bundled weights.
    from nnx.bundles import export_bundle, validate_bundle
    from nnx.extend import model_fingerprint

    class Bound:  # the bundle's calibrator protocol, nothing more
        num_classes = 3

        def __init__(self, model_id: str) -> None:
            self.model_id = model_id

        def to_json(self) -> dict[str, object]:
            return {"format": "test.temperature/1", "labels": [0, 1, 2],
                    "model_id": self.model_id, "temperature": 1.5}

    model, run = _qat_run(tmp_path / "runs")
    fingerprint = model_fingerprint(model)
    info = export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs",
                         calibrators=[Bound(fingerprint)])
    assert validate_bundle(tmp_path / "b") == info
    assert fingerprint != model_fingerprint(_model())
