"""reconstruct_bundle and ReconstructedBundle.resume (spec §22): a copied bundle rebuilds
a model that predicts bit for bit like the source and resumes its run bit for bit; what
is missing is named at once before any model is allocated; what cannot resume is
refused before anything changes."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from _support.bundles import (
    batches,
    model,
    params,
    rewrite_state,
    state,
    train,
)
from torch import nn

from nnx import (
    ComponentSpec,
    Devices,
    EarlyStopping,
    Losses,
    ModelSpec,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNTrainParams,
    TransformRecipe,
    register_model_factory,
    registered_model_factories,
    unregister_model_factory,
)
from nnx.bundles import (
    BundleCapabilityError,
    BundleReconstructionError,
    export_bundle,
    reconstruct_bundle,
    validate_bundle,
)
from nnx.models import MissingModelFactoryError, resolve_model_factory
from nnx.provenance import ExperimentManifest


def _callbacks():
    return [EarlyStopping(patience=5)]


def test_a_copied_bundle_resumes_one_epoch_equal_to_the_uninterrupted_run(tmp_path):
    full = model().train(params(3), callbacks=_callbacks(), verbose=False, root=tmp_path / "a")
    first = train(tmp_path / "b")
    export_bundle(first.id, tmp_path / "exported", root=tmp_path / "b")
    shutil.copytree(tmp_path / "exported", tmp_path / "elsewhere")
    shutil.rmtree(tmp_path / "b")  # nothing of the source run is left to read
    validate_bundle(tmp_path / "elsewhere")
    rebuilt = reconstruct_bundle(tmp_path / "elsewhere", components=_callbacks())
    resumed = rebuilt.resume(params(1), callbacks=_callbacks(), verbose=False,
                             root=tmp_path / "c")
    expected = NNCheckpoint.load(full.id, "last", root=tmp_path / "a")
    got = NNCheckpoint.load(resumed.id, "last", root=tmp_path / "c")
    assert got.epoch == expected.epoch == 2
    assert expected.state_dict.keys() == got.state_dict.keys()
    assert all(torch.equal(expected.state_dict[k], got.state_dict[k])
               for k in expected.state_dict)
    assert [r.state() for r in resumed.idps] == [r.state() for r in full.idps if r.epoch == 2]
    status = resumed.resume_status
    info = rebuilt.info
    assert status.mode == "stateful" and status.source_run == first.id
    assert status.source_checkpoint == f"bundle-{info.generation[:16]}_e1"
    assert resumed.loop_params.parent_checkpoint == status.source_checkpoint
    assert status.restored_components == ["early_stopping", "nnx.update_engine"]


def test_the_rebuilt_model_predicts_bit_for_bit_like_the_source(tmp_path):
    run = train(tmp_path / "runs")
    source = NNModel.from_checkpoint(NNCheckpoint.load(run.id, "last", root=tmp_path / "runs"))
    export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    rebuilt = reconstruct_bundle(tmp_path / "b").model
    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(3))
    assert torch.equal(rebuilt.predict(x).logits, source.predict(x).logits)


def test_provenance_links_the_bundles_run_epoch_and_generation(tmp_path):
    m = model()
    plan = ExperimentManifest.for_model(m, objective={"id": "supervised", "version": 1})
    run = m.train(params(2), callbacks=_callbacks(), verbose=False, root=tmp_path / "runs",
                  provenance=plan)
    export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    rebuilt = reconstruct_bundle(tmp_path / "b")
    attempt_id = run.provenance.attempt.attempt_id
    shutil.rmtree(tmp_path / "runs")  # the parent is linked from the bundle, not from disk
    resumed = rebuilt.resume(params(1), callbacks=_callbacks(), verbose=False,
                             root=tmp_path / "c", provenance=plan)
    parent = resumed.provenance.attempt.parent
    assert parent["run_id"] == run.id and parent["epoch"] == 1
    assert parent["bundle_generation"] == rebuilt.info.generation
    assert parent["attempt_id"] == attempt_id
    assert parent["checkpoint"] == f"bundle-{rebuilt.info.generation[:16]}_e1"


def test_an_inference_bundle_rebuilds_but_cannot_resume(tmp_path):
    from nnx import ModelCheckpoint

    run = model().train(params(1), callbacks=[ModelCheckpoint(prefix="snap")], verbose=False,
                        root=tmp_path / "runs")
    export_bundle(run.id, tmp_path / "b", checkpoint="snap_e0", root=tmp_path / "runs")
    rebuilt = reconstruct_bundle(tmp_path / "b")
    before = {k: v.clone() for k, v in rebuilt.model.net.state_dict().items()}
    with pytest.raises(BundleCapabilityError, match="inference bundle"):
        rebuilt.resume(params(1), verbose=False, root=tmp_path / "c")
    assert not (tmp_path / "c").exists()
    assert all(torch.equal(v, rebuilt.model.net.state_dict()[k]) for k, v in before.items())


def test_a_trainer_runs_bundle_cannot_resume(tmp_path):
    run = train(tmp_path / "runs")
    export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    value = state(tmp_path / "b")  # what export records for a Trainer run's checkpoint
    value["resume_refusal"] = "a Trainer run's bundle (named optimizers) resumes only ..."
    rewrite_state(tmp_path / "b", value)
    rebuilt = reconstruct_bundle(tmp_path / "b")
    with pytest.raises(BundleCapabilityError, match="Trainer run"):
        rebuilt.resume(params(1), verbose=False, root=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_export_records_the_trainer_refusal(tmp_path):
    from nnx import NNEvaluationDataPoint, NNOptimParams, NNTrainerParams, Trainer

    def step(ctx):
        x, y = ctx.batch
        optimizer = ctx.optimizers["net"]
        optimizer.zero_grad()
        loss = ctx.model.loss_fn(ctx.model.net(x), y)
        loss.backward()
        optimizer.step()
        ctx.report_update("net")
        return NNEvaluationDataPoint(loss=float(loss.detach()))

    trainer_params = (NNTrainerParams.builder().n_epochs(1).train_loader(batches())
                      .optimizer("net", NNOptimParams.builder().adam(max_lr=1e-3).build())
                      .seed(0).build())
    run = Trainer(model()).train(trainer_params, trainer_step_fn=step, verbose=False,
                                 root=tmp_path / "runs")
    info = export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    assert "Trainer run" in info.resume_refusal
    rebuilt = reconstruct_bundle(tmp_path / "b")
    with pytest.raises(BundleCapabilityError, match="Trainer run"):
        rebuilt.resume(params(1), verbose=False, root=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def _converting_op(net, config, *, source):
    """Stands in for a conversion at train end (a QAT convert): it declares so."""


_converting_op.converts_at_train_end = True  # type: ignore[attr-defined]


def test_a_topology_converted_at_train_end_cannot_resume(tmp_path):
    from nnx import register_transform, unregister_transform

    register_transform("test.convert", 1, _converting_op)
    try:
        m = model()
        m.apply_transform(TransformRecipe("test.convert", 1, {}))
        run = m.train(params(1), verbose=False, root=tmp_path / "runs")
        info = export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
        assert "converted the topology at train end" in info.resume_refusal
        rebuilt = reconstruct_bundle(tmp_path / "b")
        with pytest.raises(BundleCapabilityError, match="train end"):
            rebuilt.resume(params(1), verbose=False, root=tmp_path / "c")
    finally:
        unregister_transform("test.convert", 1)
    assert not (tmp_path / "c").exists()


def test_a_recorded_recipe_is_replayed_and_its_bundle_resumes(tmp_path):
    recipe = TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"], "rank": 2})

    def low_rank():
        m = model()
        m.apply_transform(recipe)
        return m

    full = low_rank().train(params(2), verbose=False, root=tmp_path / "a")
    first = low_rank().train(params(1), verbose=False, root=tmp_path / "b")
    export_bundle(first.id, tmp_path / "bundle", root=tmp_path / "b")
    rebuilt = reconstruct_bundle(tmp_path / "bundle")
    assert rebuilt.model.transforms == (recipe,)
    resumed = rebuilt.resume(params(1), verbose=False, root=tmp_path / "c")
    a = NNCheckpoint.load(full.id, "last", root=tmp_path / "a").state_dict
    b = NNCheckpoint.load(resumed.id, "last", root=tmp_path / "c").state_dict
    assert all(torch.equal(a[k], b[k]) for k in a)


class _Encoder(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Linear(3, width)
        self.head = nn.Linear(width, 3)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


class _Required:
    def __init__(self):
        self.count = 0

    def component_spec(self):
        return ComponentSpec("test.counter", version=1)

    def component_state(self):
        return {"count": self.count}

    def load_component_state(self, state, *, version):
        self.count = state["count"]

    def check_component_state(self, state, *, version):
        return [] if state["count"] >= 0 else ["negative count"]


def _registered_run(tmp_path):
    register_model_factory("test.encoder", 1, lambda config: _Encoder(config["width"]))
    try:
        m = NNModel(params=NNModelParams(net=ModelSpec("test.encoder", 1, {"width": 4}),
                                         loss=Losses.CROSS_ENTROPY))
        run = m.train(NNTrainParams(n_epochs=1, train_loader=batches()), verbose=False,
                      components=[_Required()], root=tmp_path / "runs")
    finally:
        unregister_model_factory("test.encoder", 1)
    export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    return run


def test_every_missing_factory_and_component_is_named_at_once(tmp_path, monkeypatch):
    _registered_run(tmp_path)
    built = []
    monkeypatch.setattr(_Encoder, "__init__", lambda *a, **k: built.append(a))
    with pytest.raises(BundleReconstructionError) as caught:
        reconstruct_bundle(tmp_path / "b")
    message = str(caught.value)
    assert "test.encoder@v1" in message and "'test.counter'" in message
    assert built == []  # nothing was allocated
    assert ("test.encoder", 1) not in registered_model_factories()


def test_the_callers_factories_rebuild_and_the_registry_is_left_as_it_was(tmp_path):
    _registered_run(tmp_path)
    factories = {("test.encoder", 1): lambda config: _Encoder(config["width"])}
    rebuilt = reconstruct_bundle(tmp_path / "b", factories=factories, components=[_Required()])
    assert isinstance(rebuilt.model.net, _Encoder)
    assert ("test.encoder", 1) not in registered_model_factories()
    resumed = rebuilt.resume(NNTrainParams(n_epochs=1, train_loader=batches()), verbose=False,
                             components=[_Required()], root=tmp_path / "c")
    assert "test.counter" in resumed.resume_status.restored_components


def test_a_component_whose_saved_state_it_refuses(tmp_path):
    _registered_run(tmp_path)
    value = state(tmp_path / "b")
    value["training"]["components"]["test.counter"]["state"]["count"] = -1
    rewrite_state(tmp_path / "b", value)
    factories = {("test.encoder", 1): lambda config: _Encoder(config["width"])}
    with pytest.raises(BundleReconstructionError, match="negative count"):
        reconstruct_bundle(tmp_path / "b", factories=factories, components=[_Required()])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has CUDA")
def test_a_model_saved_on_cuda_rebuilds_on_cpu_when_asked(tmp_path):
    run = train(tmp_path / "runs")
    export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    value = state(tmp_path / "b")
    value["model"]["device"] = "CUDA"  # what a CUDA run records
    rewrite_state(tmp_path / "b", value)
    with pytest.raises(BundleReconstructionError, match="saved on CUDA"):
        reconstruct_bundle(tmp_path / "b")
    rebuilt = reconstruct_bundle(tmp_path / "b", device=Devices.CPU)
    assert next(rebuilt.model.net.parameters()).device.type == "cpu"


def test_excluded_submodules_rebuild_strictly_and_cannot_resume(tmp_path):
    m = model()
    m.net.add_module("predictor", nn.Linear(3, 3))  # attached by the run (a JEPA predictor)
    with pytest.warns(RuntimeWarning, match="predictor added"):
        run = m.train(params(1), verbose=False, root=tmp_path / "runs", salt="with-predictor")
    export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    with pytest.raises(ValueError, match="predictor"):
        reconstruct_bundle(tmp_path / "b")
    rebuilt = reconstruct_bundle(tmp_path / "b", exclude_submodules=["predictor"])
    saved = NNCheckpoint.load(run.id, "last", root=tmp_path / "runs").state_dict
    assert all(torch.equal(v, saved[k]) for k, v in rebuilt.model.net.state_dict().items())
    with pytest.raises(BundleCapabilityError, match="exclude_submodules"):
        rebuilt.resume(params(1), verbose=False, root=tmp_path / "c")
    with pytest.raises(ValueError, match="no weights under 'nothing'"):
        reconstruct_bundle(tmp_path / "b", exclude_submodules=["nothing"])


def test_the_bundle_json_is_data_only(tmp_path):
    run = train(tmp_path / "runs")
    export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    manifest = json.loads((tmp_path / "b" / "bundle.json").read_text())
    assert set(manifest) == {"format", "version", "generation", "files"}
    assert manifest["format"] == "nnx.run_bundle" and manifest["version"] == 1
    assert all(set(entry) == {"sha256", "size"} for entry in manifest["files"].values())


def test_the_callers_factories_never_enter_the_process_registry(tmp_path, monkeypatch):
    # factories= stands in for the registry in the rebuilding context only: the registry
    # is never edited, and another thread resolving the same spec meanwhile finds nothing.
    import threading

    from nnx._foundation import plugins

    _registered_run(tmp_path)
    seen = []

    def other_thread():
        try:
            seen.append(resolve_model_factory(ModelSpec("test.encoder", 1, {"width": 4})))
        except MissingModelFactoryError as exc:
            seen.append(exc)

    def factory(config):
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        return _Encoder(config["width"])

    def edited(*args, **kwargs):
        raise AssertionError("reconstruct_bundle edited the process registry")

    for name in ("register", "unregister"):
        monkeypatch.setattr(plugins.VersionedRegistry, name, edited)
        monkeypatch.setattr(plugins.EntryPointRegistry, name, edited)
    rebuilt = reconstruct_bundle(tmp_path / "b", factories={("test.encoder", 1): factory},
                                 components=[_Required()])
    assert isinstance(rebuilt.model.net, _Encoder)
    assert seen and all(isinstance(found, MissingModelFactoryError) for found in seen)
    with pytest.raises(MissingModelFactoryError):  # and nothing lingers in this thread
        resolve_model_factory(ModelSpec("test.encoder", 1, {"width": 4}))
