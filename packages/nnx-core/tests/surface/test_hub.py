"""NNModel.save_pretrained / from_pretrained / push_to_hub (spec §3.2, §15; docs/hub.md)."""

from __future__ import annotations

import json
import pickle
import shutil
import sys

import pytest
import torch
from torch import nn

import nnx._surface.hub as hub_module
from nnx import (
    CheckpointReadError,
    Devices,
    Losses,
    MissingModelFactoryError,
    ModelSpec,
    Nets,
    NNModel,
    NNModelParams,
    NNParams,
    register_model_factory,
)
from nnx.models import unregister_model_factory
from nnx.params.conv import NNConvParams
from nnx.tasks import TaskSpec
from nnx.transforms import LiveTopologyError, TransformCompatibilityError, TransformRecipe

CPU = NNModelParams(device=Devices.CPU)


class Encoder(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, width), nn.Tanh(), nn.Linear(width, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


@pytest.fixture(autouse=True)
def _factory():
    register_model_factory("hubtest.encoder", 1, lambda config: Encoder(config["width"]))
    yield
    unregister_model_factory("hubtest.encoder", 1)


def feed_fwd() -> NNModel:
    return NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)), params=CPU)


def conv() -> NNModel:
    net_params = NNConvParams(input_dim=64, output_dim=3, conv_channels=(4,), in_channels=1)
    return NNModel(net_params=net_params,
                   params=NNModelParams(net=Nets.CONV, device=Devices.CPU))


def registered() -> NNModel:
    spec = ModelSpec("hubtest.encoder", 1, {"width": 6}, seed=3)
    return NNModel(params=NNModelParams(net=spec, device=Devices.CPU))


def runtime() -> NNModel:
    return NNModel(module=Encoder(5), params=CPU)


INPUTS = {"feed_fwd": (feed_fwd, (5, 4)), "conv": (conv, (5, 1, 8, 8)),
          "registered": (registered, (5, 4))}


def _perturb(model: NNModel) -> None:
    """Weights no fresh build has, so a round trip that re-initialized would show."""
    with torch.no_grad():
        for p in model.net.parameters():
            p.add_(torch.randn_like(p))


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_a_pretrained_directory_round_trips_with_equal_predictions(tmp_path, kind):
    torch.manual_seed(0)
    make, shape = INPUTS[kind]
    model = make()
    _perturb(model)
    assert model.save_pretrained(tmp_path / "m") is None
    assert {p.name for p in (tmp_path / "m").iterdir()} == {"config.json", "model.safetensors",
                                                           "README.md"}
    loaded = NNModel.from_pretrained(tmp_path / "m")
    x = torch.randn(*shape)
    assert torch.equal(loaded.predict(x).logits, model.predict(x).logits)
    assert loaded.params == model.params and loaded.net_params == model.net_params
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["nnx"] == {"format": "nnx.hub", "version": 1}
    assert config["model"] == json.loads(json.dumps(model.params.state()))


def test_the_task_spec_and_transform_recipes_are_carried_and_replayed(tmp_path):
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                    params=NNModelParams(device=Devices.CPU, task=TaskSpec.categorical(3)))
    recipe = TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"], "rank": 2})
    model.apply_transform(recipe)
    model.save_pretrained(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["model"]["task"]["kind"] == "categorical"
    assert config["transforms"] == [recipe.state()]
    loaded = NNModel.from_pretrained(tmp_path / "m")
    assert loaded.transforms == (recipe,) and loaded.params.task == model.params.task
    x = torch.randn(3, 4)
    assert torch.equal(loaded.predict_proba(x).probabilities,
                       model.predict_proba(x).probabilities)


def test_an_unknown_transform_in_a_config_is_refused_before_the_weights_are_read(
        tmp_path, monkeypatch):
    feed_fwd().save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    config = json.loads(path.read_text())
    config["transforms"] = [{"op": "acme.nowhere", "version": 1, "config": {}}]
    path.write_text(json.dumps(config))
    monkeypatch.setattr("safetensors.safe_open", _forbidden)
    with pytest.raises(TransformCompatibilityError, match=r"transforms\[0\] \(acme.nowhere@v1\)"):
        NNModel.from_pretrained(tmp_path / "m")


def _forbidden(*args, **kwargs):
    raise AssertionError("this read must not happen")


@pytest.mark.parametrize("how", ["save", "save_and_push", "push"])
def test_a_runtime_module_is_refused_before_any_directory_exists(tmp_path, how):
    model = runtime()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    with pytest.raises(MissingModelFactoryError, match=(
            r"a Hub save is a portable save, but this model wraps a runtime module "
            rf"\({__name__}\.Encoder, reconstructible=False\).*nothing was written")):
        if how == "push":
            model.push_to_hub("acme/tiny")
        else:
            model.save_pretrained(tmp_path / "out" / "m", push_to_hub=how == "save_and_push",
                                  repo_id="acme/tiny")
    assert not (tmp_path / "out").exists()
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())


def test_a_factory_that_now_builds_another_topology_is_refused_before_any_weight_loads(
        tmp_path, monkeypatch):
    registered().save_pretrained(tmp_path / "m")
    register_model_factory("hubtest.encoder", 1, lambda config: Encoder(config["width"] + 1))
    monkeypatch.setattr("safetensors.torch.load_file", _forbidden)  # no tensor data read
    with pytest.raises(ValueError, match=r"hubtest.encoder@v1.*do not fit.*nothing was loaded"):
        NNModel.from_pretrained(tmp_path / "m")


def test_a_missing_factory_is_refused_naming_it(tmp_path, monkeypatch):
    """Before the weights are read (for a repo id: downloaded)."""
    registered().save_pretrained(tmp_path / "m")
    unregister_model_factory("hubtest.encoder", 1)
    fetched = []
    real_fetch = hub_module.fetch
    monkeypatch.setattr(hub_module, "fetch",
                        lambda src, name, kw: fetched.append(name) or real_fetch(src, name, kw))
    try:
        with pytest.raises(MissingModelFactoryError, match=r"hubtest\.encoder@v1"):
            NNModel.from_pretrained(tmp_path / "m")
        assert fetched == ["config.json"]
    finally:
        register_model_factory("hubtest.encoder", 1, lambda config: Encoder(config["width"]))


def test_loading_never_unpickles(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = conv()
    model.save_pretrained(tmp_path / "m")
    # A pickle beside the two files (another library's weights, say) is never opened.
    torch.save(model.net.state_dict(), tmp_path / "m" / "pytorch_model.bin")
    monkeypatch.setattr(pickle, "load", _forbidden)
    monkeypatch.setattr(pickle, "loads", _forbidden)
    monkeypatch.setattr(pickle, "Unpickler", _forbidden)
    monkeypatch.setattr(torch, "load", _forbidden)
    loaded = NNModel.from_pretrained(tmp_path / "m")
    x = torch.randn(2, 1, 8, 8)
    assert torch.equal(loaded.predict(x).logits, model.predict(x).logits)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c.pop("nnx"), "not an NNx Hub config"),
    (lambda c: c["nnx"].update(version=2), "format version 2; this NNx reads version 1"),
    (lambda c: c.update(extra=1), r"unknown keys \['extra'\]"),
    (lambda c: c.update(transforms={}), "'transforms' must be a list"),
])
def test_a_config_nnx_did_not_write_is_refused(tmp_path, edit, message):
    feed_fwd().save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match=message):
        NNModel.from_pretrained(tmp_path / "m")


def test_a_config_declaring_a_size_torch_cannot_count_is_named(tmp_path):
    feed_fwd().save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    config = json.loads(path.read_text())
    config["net"]["hidden_dims"] = [2**62]
    path.write_text(json.dumps(config))
    rng = torch.get_rng_state()
    with pytest.raises(CheckpointReadError, match=rf"^cannot read checkpoint "
                       rf"{path.as_posix()}: the net its configuration declares cannot be "
                       r"built \(RuntimeError: .*overflow"):
        NNModel.from_pretrained(tmp_path / "m")
    assert torch.equal(torch.get_rng_state(), rng)


@pytest.mark.parametrize(("text", "message"), [
    ("[" * 10_000 + "]" * 10_000, "nests"),
    ('{"nnx": NaN}', "strict JSON"),
])
def test_a_planted_config_is_refused_before_anything_walks_it(tmp_path, text, message):
    feed_fwd().save_pretrained(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text(text)
    with pytest.raises(ValueError, match=message):
        NNModel.from_pretrained(tmp_path / "m")


def test_a_directory_without_the_files_names_what_is_missing(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(FileNotFoundError, match=r"holds no config\.json"):
        NNModel.from_pretrained(tmp_path / "m")


def test_an_in_place_change_no_transform_reproduces_is_refused_before_writing(tmp_path):
    model = feed_fwd()
    model.net.layers[0] = nn.Linear(4, 8, bias=False)
    with pytest.raises(LiveTopologyError):
        model.save_pretrained(tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_device_overrides_the_saved_device_and_a_subclass_rebuilds_as_itself(tmp_path):
    class Mine(NNModel):
        pass

    params = NNModelParams(device=Devices.AUTO, loss=Losses.CROSS_ENTROPY)
    NNModel(net_params=NNParams(input_dim=4, output_dim=3), params=params).save_pretrained(
        tmp_path / "m")
    loaded = Mine.from_pretrained(tmp_path / "m", device="cpu")
    assert type(loaded) is Mine
    assert loaded.params.device is Devices.CPU and loaded.device == torch.device("cpu")


def test_unknown_arguments_are_refused(tmp_path):
    feed_fwd().save_pretrained(tmp_path / "m")
    with pytest.raises(TypeError, match=r"unexpected arguments \['strict'\]"):
        NNModel.from_pretrained(tmp_path / "m", strict=False)


def test_a_save_overwrites_the_files_and_keeps_a_users_model_card(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "README.md").write_text("mine")
    torch.manual_seed(0)
    first, second = feed_fwd(), feed_fwd()
    first.save_pretrained(tmp_path / "m")
    second.save_pretrained(tmp_path / "m")
    assert (tmp_path / "m" / "README.md").read_text() == "mine"
    x = torch.randn(2, 4)
    loaded = NNModel.from_pretrained(tmp_path / "m")
    assert torch.equal(loaded.predict(x).logits, second.predict(x).logits)
    assert not [p for p in (tmp_path / "m").iterdir() if p.name.startswith(".")]  # no temps
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        first.save_pretrained(tmp_path / "file")
    assert (tmp_path / "file").read_text() == "x"


# -- repo ids (the hub extra), offline ---------------------------------------------------
def _cache(tmp_path, source, repo_id="acme/tiny", revision="main"):
    """A huggingface_hub cache holding ``source``'s files as ``repo_id``'s one commit, laid
    out as huggingface_hub itself lays a download (refs/<revision> -> snapshots/<sha>)."""
    cache = tmp_path / "hf-cache"
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / revision).write_text(commit)
    shutil.copytree(source, repo / "snapshots" / commit)
    return cache


def _cached(tmp_path, make):
    """A trained-looking model of ``make`` saved and placed in a cache as acme/tiny."""
    pytest.importorskip("huggingface_hub")
    torch.manual_seed(0)
    model = make()
    _perturb(model)
    model.save_pretrained(tmp_path / "m")
    return model, _cache(tmp_path, tmp_path / "m")


def test_a_repo_id_loads_offline_from_the_huggingface_hub_cache(tmp_path):
    model, cache = _cached(tmp_path, registered)
    loaded = NNModel.from_pretrained("acme/tiny", cache_dir=cache, local_files_only=True)
    x = torch.randn(4, 4)
    assert torch.equal(loaded.predict(x).logits, model.predict(x).logits)
    from huggingface_hub.errors import LocalEntryNotFoundError

    with pytest.raises(LocalEntryNotFoundError):  # not cached, and no download allowed
        NNModel.from_pretrained("acme/other", cache_dir=cache, local_files_only=True)


def test_without_the_hub_extra_a_repo_id_names_the_install_and_a_directory_still_loads(
        tmp_path, monkeypatch):
    feed_fwd().save_pretrained(tmp_path / "m")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import raises ImportError
    hint = r'pip install "nnx-core\[hub\]"'
    with pytest.raises(ImportError, match=hint):
        NNModel.from_pretrained("acme/tiny")
    with pytest.raises(ImportError, match=hint):
        feed_fwd().save_pretrained(tmp_path / "pushed", push_to_hub=True, repo_id="acme/tiny")
    assert not (tmp_path / "pushed").exists()
    with pytest.raises(ImportError, match=hint):
        feed_fwd().push_to_hub("acme/tiny")
    NNModel.from_pretrained(tmp_path / "m")  # a local directory needs nnx-core alone


@pytest.mark.slow
def test_hf_hub_offline_loads_a_cached_repo_id_without_local_files_only(tmp_path):
    """HF_HUB_OFFLINE=1 (read by huggingface_hub at import, so in a fresh process) serves a
    repo id from the cache alone, as docs/hub.md says."""
    import os
    import subprocess

    model, cache = _cached(tmp_path, feed_fwd)
    x = torch.randn(3, 4)
    torch.save(x, tmp_path / "x.pt")  # the parent's input, read back by the child
    code = ("import json, sys, torch\nfrom nnx import NNModel\n"
            "m = NNModel.from_pretrained('acme/tiny')\n"
            "x = torch.load(sys.argv[1])\n"
            "print(json.dumps(m.predict(x).logits.tolist()))\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.pt")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == model.predict(x).logits.tolist()


@pytest.mark.slow
def test_push_to_hub_reaches_huggingface_hub_with_arguments_it_accepts(tmp_path):
    """No network here: offline mode stops the push at its first request. Before that,
    NNx's calls must fit the installed huggingface_hub's signatures, and the temporary
    save is cleaned up."""
    import inspect
    import os
    import subprocess

    hub = pytest.importorskip("huggingface_hub")
    inspect.signature(hub.HfApi.create_repo).bind(
        hub.HfApi(), repo_id="acme/tiny", private=None, exist_ok=True)
    inspect.signature(hub.HfApi.upload_folder).bind(
        hub.HfApi(), repo_id="acme/tiny", folder_path=str(tmp_path), commit_message="m",
        revision=None, create_pr=None, allow_patterns=None, ignore_patterns=None,
        delete_patterns=None)
    code = ("import json, tempfile, pathlib\nfrom nnx import NNModel, NNParams\n"
            "m = NNModel(net_params=NNParams(input_dim=4, output_dim=3))\n"
            "try:\n    m.push_to_hub('acme/tiny')\n"
            "except Exception as exc:\n    print(type(exc).__name__)\n"
            "print(json.dumps([p.name for p in pathlib.Path(tempfile.gettempdir()).iterdir()]))\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp_path),
           "HF_HOME": str(tmp_path / "hf"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[-2] == "OfflineModeIsEnabled"
    assert not [n for n in json.loads(lines[-1]) if n.startswith("nnx-hub-")]
