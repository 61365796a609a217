"""Registered model factories, wrapped runtime modules and batch adapters (spec §3.2)."""

from __future__ import annotations

import pickle
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import yaml
from torch import nn
from torch.utils.data import DataLoader

from nnx import (
    BatchAdapter,
    Devices,
    KeywordInputs,
    Losses,
    MissingModelFactoryError,
    ModelSpec,
    NNCheckpoint,
    NNDataset,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    PositionalInputs,
    RuntimeModule,
    TaskSpec,
    TaskValidationError,
    register_model_factory,
    run_id,
)
from nnx._foundation.plugins import versioned_registry
from nnx.models import build_from_spec, describe, descriptor_from_state, topology_fingerprint


class Encoder(nn.Module):
    def __init__(self, input_dim: int = 5, width: int = 16, n_classes: int = 3,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(input_dim, width), nn.ReLU(), nn.Dropout(dropout))
        self.head = nn.Linear(width, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class EncoderPlus(Encoder):
    """Encoder's parameters plus one more layer: another topology under the same names."""

    def __init__(self, **config) -> None:
        super().__init__(**config)
        self.extra = nn.Linear(2, 2)


class TokenEncoder(nn.Module):
    """A keyword-input module, in the style of a transformer encoder."""

    def __init__(self, vocab: int = 20, width: int = 8, n_classes: int = 3,
                 dropout: float = 0.1) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(width, n_classes)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.drop(self.embed(input_ids)) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled)


BUILT: list[nn.Module] = []


def encoder_factory(config):
    module = Encoder(**config)
    BUILT.append(module)
    return module


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    """Each test sees acme.encoder@v1 and nothing it registers leaks into another test."""
    names = versioned_registry("nnx.model_factories")._names
    monkeypatch.setattr(names, "_explicit", dict(names._explicit))
    register_model_factory("acme.encoder", 1, encoder_factory)
    BUILT.clear()


SPEC = ModelSpec("acme.encoder", 1, {"width": 16}, seed=0)


def registered(spec: ModelSpec = SPEC, **changes) -> NNModel:
    return NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY, **changes))


def dataset() -> NNDataset:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 5, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return NNDataset(x, y, val_proportion=0.25, batch_sizes=(16, None, None), seed=7)


def plan(train_loader=None, val_loader=None, **changes) -> NNTrainParams:
    if train_loader is None:
        data = dataset()
        train_loader, val_loader = data.train_loader, data.val_loader
    return NNTrainParams(**{"n_epochs": 2, "train_loader": train_loader,
                            "val_loader": val_loader, "seed": 0,
                            "optim": NNOptimParams.builder().adam(max_lr=3e-2).build(),
                            **changes})


def token_rows(n: int = 48) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(5)
    rows = []
    for _ in range(n):
        ids = torch.randint(0, 20, (6,), generator=g)
        mask = (torch.rand(6, generator=g) > 0.2).long()
        rows.append({"input_ids": ids, "attention_mask": mask,
                     "labels": torch.tensor(int(ids[0]) % 3)})
    return rows


def token_loader(shuffle: bool = False) -> DataLoader:
    return DataLoader(token_rows(), batch_size=8, shuffle=shuffle)


KEYWORDS = KeywordInputs(("input_ids", "attention_mask"), target="labels")


def wrapped(module: nn.Module | None = None) -> NNModel:
    return NNModel(module=TokenEncoder() if module is None else module,
                   params=NNModelParams(loss=Losses.CROSS_ENTROPY), batch_adapter=KEYWORDS)


def weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def draws() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


# -- descriptors -------------------------------------------------------------------------------
def test_model_spec_state_round_trips_and_refuses_code():
    spec = ModelSpec("acme.encoder", 1, {"width": 16, "dims": [2, 3]}, seed=4)
    state = spec.state()
    assert state == {"kind": "registered", "factory": "acme.encoder@v1",
                     "config": {"width": 16, "dims": [2, 3]}, "seed": 4}
    assert spec.config["dims"] == (2, 3)  # read-only: lists arrive as tuples
    assert descriptor_from_state(state) == spec == pickle.loads(pickle.dumps(spec))
    assert hash(spec) == hash(ModelSpec.from_state(state))
    assert describe(spec) == 'acme.encoder@v1 config={"dims": [2, 3], "width": 16} seed=4'
    params = NNModelParams(net=spec)
    assert params.state()["net"] == state
    assert NNModelParams.from_state(params.state()) == params
    with pytest.raises(ValueError, match=r"ModelSpec\.config\.act.*never holds code"):
        ModelSpec("acme.encoder", 1, {"act": torch.relu})
    with pytest.raises(ValueError, match=r"ModelSpec\.seed"):
        ModelSpec("acme.encoder", 1, seed=-1)
    with pytest.raises(ValueError, match=r"ModelSpec\.seed"):
        ModelSpec("acme.encoder", 1, seed=True)
    with pytest.raises(ValueError, match=r"ModelSpec\.id"):
        ModelSpec(encoder_factory, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"ModelSpec\.version"):
        ModelSpec("acme.encoder", 0)
    with pytest.raises(ValueError, match="kind must be one of"):
        descriptor_from_state({"kind": "python", "module": "os.system"})


def test_runtime_descriptor_state_and_builtin_state_unchanged():
    module = Encoder()
    descriptor = NNModel(module=module, params=NNModelParams()).params.net
    assert isinstance(descriptor, RuntimeModule)
    assert descriptor.module == f"{__name__}.Encoder"
    assert descriptor.fingerprint == topology_fingerprint(module)
    assert descriptor.state() == {"kind": "runtime", "module": f"{__name__}.Encoder",
                                  "fingerprint": descriptor.fingerprint,
                                  "reconstructible": False}
    assert descriptor_from_state(descriptor.state()) == descriptor
    assert describe(descriptor) == f"{__name__}.Encoder (runtime, reconstructible=False)"
    with pytest.raises(ValueError, match="always False"):
        RuntimeModule("pkg.Class", descriptor.fingerprint, reconstructible=True)
    # A Nets member still serializes as its name, so every built-in run id is unchanged.
    assert NNModelParams().state() == {"net": "FEED_FWD", "loss": "CROSS_ENTROPY"}
    golden = run_id(model=NNModelParams(), net=NNParams(input_dim=4, output_dim=3,
                                                        hidden_dims=(16,)),
                    train=NNTrainParams(n_epochs=5))
    assert golden == "d036944b1d47c2a593f3b4bba9993aed"  # test_identity's "plain"


# -- registered factories ----------------------------------------------------------------------
def test_same_spec_builds_identical_weights_and_never_shifts_caller_streams():
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    expected = draws()
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    first, second = build_from_spec(SPEC), registered().net
    assert draws() == expected  # both builds left every stream where it was
    assert same(weights(first), weights(second))
    other = build_from_spec(ModelSpec("acme.encoder", 1, {"width": 16}, seed=1))
    assert not same(weights(first), weights(other))


def test_factory_sees_read_only_config_and_must_return_a_module():
    register_model_factory("acme.bad", 1, lambda config: "not a module")
    with pytest.raises(ValueError, match=r"acme\.bad@v1 returned str"):
        registered(ModelSpec("acme.bad", 1))
    with pytest.raises(TypeError, match="callable factory"):
        register_model_factory("acme.none", 1, None)  # type: ignore[arg-type]
    registered(ModelSpec("acme.encoder", 1, {"width": 4}))
    assert isinstance(BUILT[-1], Encoder) and BUILT[-1].head.in_features == 4


@pytest.mark.parametrize(("spec", "match"), [
    (ModelSpec("acme.nope", 1), r"acme\.nope@v1 is not registered.*no version of 'acme\.nope'"),
    (ModelSpec("acme.encoder", 2), r"acme\.encoder@v2 .*registered versions of 'acme\.encoder'"
                                   r": v1"),
])
def test_unknown_factory_is_refused_before_anything_runs(tmp_path, spec, match):
    with pytest.raises(MissingModelFactoryError, match=match):
        registered(spec).train(plan(), verbose=False, root=tmp_path)
    assert BUILT == [] and list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="takes no net_params"):
        NNModel(net_params=NNParams(input_dim=5, output_dim=3), params=NNModelParams(net=SPEC))


def test_registered_encoder_trains_checkpoints_resumes_and_reloads(tmp_path):
    model = registered()
    assert model.net_params is None and model.params.net == SPEC
    run = model.train(plan(), verbose=False, root=tmp_path)
    doc = yaml.safe_load((run.path / "run.yaml").read_text())
    assert "net" not in doc and doc["model"]["net"] == SPEC.state()
    assert "encoder_factory" not in (run.path / "run.yaml").read_text()
    ckpt = NNCheckpoint.load(run.id, root=tmp_path)
    assert ckpt.reconstructible and ckpt.net is None and ckpt.model["net"] == SPEC.state()

    reloaded = NNModel.from_checkpoint(ckpt)
    assert reloaded.params == model.params and reloaded.net_params is None
    assert same(weights(reloaded.net), weights(model.net))
    x = torch.randn(7, 5)
    assert torch.equal(reloaded.predict(x).logits, model.predict(x).logits)

    more = registered().train(plan(resume_from_run_id=run.id), verbose=False, root=tmp_path)
    assert more.resume_status.mode == "stateful"
    assert [r.epoch for r in more.epoch_records()] == [2, 3]


def test_registered_topology_mismatch_is_refused_before_loading(tmp_path):
    run = registered().train(plan(n_epochs=1), verbose=False, root=tmp_path)
    ckpt = NNCheckpoint.load(run.id, root=tmp_path)
    register_model_factory("acme.encoder", 1, lambda config: BUILT.append(
        EncoderPlus(**config)) or BUILT[-1])
    with pytest.raises(ValueError, match=r"do not fit.*unexpected \[\].*nothing was loaded"):
        NNModel.from_checkpoint(ckpt)
    rebuilt = BUILT[-1]
    assert isinstance(rebuilt, EncoderPlus)
    # Refused on the meta device (issue 24): the factory's net was never allocated,
    # so no saved weight can have been loaded into it.
    assert all(p.is_meta for p in rebuilt.parameters())


def test_a_descriptor_net_checks_the_task_width_on_the_first_batch(tmp_path):
    model = registered(task=TaskSpec.categorical(5))  # the encoder has 3 outputs
    with pytest.raises(TaskValidationError, match="task declares 5"):
        model.evaluate(dataset().val_loader)


# -- runtime modules ---------------------------------------------------------------------------
def test_wrapped_keyword_module_trains_in_place(tmp_path):
    my_encoder = TokenEncoder()
    before, streams = weights(my_encoder), torch.get_rng_state()
    model = wrapped(my_encoder)
    assert model.net is my_encoder and model.net_params is None
    assert same(weights(my_encoder), before) and torch.equal(torch.get_rng_state(), streams)
    assert isinstance(model.params.net, RuntimeModule)
    assert model.device == torch.device("cpu")  # Devices.AUTO leaves it where it is

    run = model.train(plan(token_loader(shuffle=True), token_loader()), verbose=False,
                      root=tmp_path)
    assert model.net is my_encoder and not same(weights(my_encoder), before)
    doc = yaml.safe_load((run.path / "run.yaml").read_text())
    assert "net" not in doc and doc["model"]["net"]["kind"] == "runtime"
    assert doc["model"]["net"]["reconstructible"] is False
    ckpt = NNCheckpoint.load(run.id, root=tmp_path)
    assert ckpt.reconstructible is False and ckpt.model["net"] == model.params.net.state()

    batch = next(iter(token_loader()))
    keyword = model.predict({"input_ids": batch["input_ids"],
                             "attention_mask": batch["attention_mask"]})
    assert keyword.logits.shape == (8, 3)
    assert torch.equal(keyword.logits, model.predict(token_loader()).logits[:8])
    assert model.evaluate(token_loader()).loss is not None


def test_explicit_device_moves_the_same_instance():
    module = Encoder()
    model = NNModel(module=module, params=NNModelParams(device=Devices.CPU))
    assert model.net is module and model.device == torch.device("cpu")
    assert model.params.device is Devices.CPU


def test_identical_architectures_share_a_run_id_and_dropout_tells_them_apart():
    def identity(module: nn.Module) -> str:
        params = NNModel(module=module, params=NNModelParams()).params
        return run_id(model=params, train=NNTrainParams(n_epochs=1))

    torch.manual_seed(0)
    a = Encoder(dropout=0.1)
    b = Encoder(dropout=0.1)  # other weights, the same architecture
    assert not same(weights(a), weights(b))
    assert identity(a) == identity(b)
    assert identity(Encoder(dropout=0.2)) != identity(a)
    assert identity(Encoder(width=8, dropout=0.1)) != identity(a)


def test_runtime_checkpoint_reload_needs_a_module_of_the_same_topology(tmp_path):
    model = wrapped()
    run = model.train(plan(token_loader(), n_epochs=1), verbose=False, root=tmp_path)
    ckpt = NNCheckpoint.load(run.id, root=tmp_path)
    with pytest.raises(MissingModelFactoryError, match=r"reconstructible=False.*module="):
        NNModel.from_checkpoint(ckpt)

    other = TokenEncoder(dropout=0.3)
    untouched = weights(other)
    with pytest.raises(ValueError, match="another topology"):
        NNModel.from_checkpoint(ckpt, module=other, batch_adapter=KEYWORDS)
    assert same(weights(other), untouched)

    fresh = TokenEncoder()
    reloaded = NNModel.from_checkpoint(ckpt, module=fresh, batch_adapter=KEYWORDS)
    assert reloaded.net is fresh and same(weights(fresh), weights(model.net))
    assert reloaded.params == model.params
    with pytest.raises(MissingModelFactoryError, match="portable save"):
        ckpt.save(tmp_path / "portable.safetensors")
    assert not (tmp_path / "portable.safetensors").exists()

    more = wrapped(TokenEncoder()).train(plan(token_loader(), resume_from_run_id=run.id),
                                         verbose=False, root=tmp_path)
    assert more.resume_status.mode == "stateful"
    assert [r.epoch for r in more.epoch_records()] == [1, 2]


def test_a_runtime_descriptor_alone_builds_nothing():
    descriptor = NNModel(module=Encoder(), params=NNModelParams()).params.net
    with pytest.raises(MissingModelFactoryError, match=r"NNModel\(module=\.\.\.\)"):
        NNModel(params=NNModelParams(net=descriptor))
    with pytest.raises(ValueError, match="topology differs"):
        NNModel(module=Encoder(width=4), params=NNModelParams(net=descriptor))
    with pytest.raises(ValueError, match=r"leave NNModelParams\.net at its default"):
        NNModel(module=Encoder(), params=NNModelParams(net=SPEC))


RELOAD = textwrap.dedent("""
    import sys
    from nnx import NNRun
    for run_id in sys.argv[2:]:
        run = NNRun.load(run_id, root=sys.argv[1])
        print(run.model_params.net.state()["kind"], run.net_params)
        print(run)
""")


def test_runs_reload_offline_in_a_fresh_process(tmp_path):
    spec_run = registered().train(plan(n_epochs=1), verbose=False, root=tmp_path)
    module_run = wrapped().train(plan(token_loader(), n_epochs=1), verbose=False, root=tmp_path)
    out = subprocess.run([sys.executable, "-c", RELOAD, str(tmp_path), spec_run.id,
                          module_run.id], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "registered None" in out.stdout and "runtime None" in out.stdout
    assert 'net: acme.encoder@v1 config={"width": 16} seed=0' in out.stdout
    assert f"net: {__name__}.TokenEncoder (runtime, reconstructible=False)" in out.stdout
    assert "shape" not in out.stdout  # no dims, dropout or activation line


# -- batch adapters ----------------------------------------------------------------------------
def test_positional_and_keyword_adapters_split_batches():
    x, t, y = torch.ones(2, 3), torch.zeros(2), torch.tensor([0, 1])
    two = PositionalInputs(2)
    assert two.split((x, t, y))[2] is y and two.split((x, t))[2] is None
    with pytest.raises(ValueError, match=r"PositionalInputs\(n_inputs=2\).*length 1"):
        two.split((x,))
    args, kwargs, target = KEYWORDS.split({"input_ids": x, "attention_mask": t, "labels": y})
    assert args == () and set(kwargs) == {"input_ids", "attention_mask"} and target is y
    with pytest.raises(ValueError, match=r"no \['attention_mask'\]"):
        KEYWORDS.split({"input_ids": x})
    with pytest.raises(ValueError, match="mapping batches"):
        KEYWORDS.split((x, y))
    with pytest.raises(TypeError, match="override output"):
        BatchAdapter().output({"logits": x})


class DictOutput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 2)
        self.b = nn.Linear(1, 2)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.a(x) + self.b(t)}


class LogitsOf(PositionalInputs):
    def output(self, raw):
        return raw["logits"]


def test_custom_adapter_reads_a_non_tensor_output_and_two_positional_inputs(tmp_path):
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(4, 3, generator=g), torch.randn(4, 1, generator=g),
                torch.randint(0, 2, (4,), generator=g)) for _ in range(3)]
    model = NNModel(module=DictOutput(), params=NNModelParams(), batch_adapter=LogitsOf(2))
    run = model.train(plan(batches, batches, n_epochs=1), verbose=False, root=tmp_path)
    assert run.epoch_records()[-1].val_edp.loss is not None
    assert model.predict(batches[:1]).logits.shape == (4, 2)
    with pytest.raises(TypeError, match="override output"):
        NNModel(module=DictOutput(), batch_adapter=PositionalInputs(2)).predict(batches[:1])


class SwappedBatches(Encoder):
    """Defines its own unpack_batch: loaders yield (y, x)."""

    def unpack_batch(self, batch):
        return (batch[1],), batch[0]


def test_a_module_with_unpack_batch_keeps_using_it():
    x, y = torch.randn(6, 5), torch.tensor([0, 1, 2, 0, 1, 2])
    model = NNModel(module=SwappedBatches(), params=NNModelParams())
    (inputs,), target = model.split_batch((y, x))
    assert inputs is x and target is y
    assert model.predict([(y, x)]).logits.shape == (6, 3)


def test_registered_and_wrapped_modules_train_under_an_objective_and_the_trainer(tmp_path):
    from nnx import NNParamGroupSpec, NNTrainerParams, Trainer, supervised_objective

    # A keyword-input module through the shared engine: the same weights as the default step.
    by_step, by_objective = wrapped(), wrapped(copy_of := TokenEncoder())
    copy_of.load_state_dict(by_step.net.state_dict())
    by_step.train(plan(token_loader(), n_epochs=2), verbose=False, root=tmp_path / "s")
    by_objective.train(plan(token_loader(), n_epochs=2), objective=supervised_objective(),
                       verbose=False, root=tmp_path / "o")
    assert by_objective.net is copy_of
    for a, b in zip(by_step.net.parameters(), copy_of.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)

    # A registered encoder under the Trainer, resumed warm and reloaded.
    def trainer_plan(n_epochs=2, **changes):
        everything = NNOptimParams.builder().adam(max_lr=3e-2).param_groups(
            [NNParamGroupSpec(name_pattern="*")]).build()
        data = dataset()
        return NNTrainerParams(n_epochs=n_epochs, train_loader=data.train_loader,
                               val_loader=data.val_loader, seed=0,
                               optims={"all": everything}, **changes)

    model = registered()
    run = Trainer(model).train(trainer_plan(), objective=supervised_objective(),
                               verbose=False, root=tmp_path / "t")
    more = Trainer(registered()).train(trainer_plan(resume_from_run_id=run.id),
                                       objective=supervised_objective(), verbose=False,
                                       root=tmp_path / "t")
    assert more.resume_status.mode == "stateful"
    assert [r.epoch for r in more.epoch_records()] == [2, 3]
    reloaded = NNModel.from_checkpoint(NNCheckpoint.load(run.id, root=tmp_path / "t"))
    assert same(weights(reloaded.net), weights(model.net))
