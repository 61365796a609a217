"""Hub-style save / load of an NNModel (spec §3.2, §15; docs/hub.md).

``NNModel.save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` follow
huggingface-hub's ``ModelHubMixin`` (same names, same arguments for the Hub side)
without inheriting it: NNModel is not an ``nn.Module``, and a local directory must
save and load with nnx-core alone, so ``huggingface_hub`` is imported only for a
repo id or a push (the ``hub`` extra).

Every refusal comes before a directory is created or a weight is read: a runtime
module (MissingModelFactoryError: no factory can rebuild it), an in-place change of
the net no registered transform reproduces (LiveTopologyError), an unknown factory
or transform recipe in a config. The rebuild compares the net with the saved
tensors' names and shapes (read from the safetensors header) before loading any.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nnx._foundation.atomic import atomic_write_bytes
from nnx._persistence.hub_format import (
    CONFIG_NAME,
    WEIGHTS_NAME,
    encode_config,
    encode_weights,
    fetch,
    import_hub,
    read_config,
    read_weights,
    weight_shapes,
)
from nnx._persistence.read_errors import BUILD_FAILURES, unbuildable
from nnx._surface.live_changes import recording_live_changes
from nnx.models import MissingModelFactoryError, ModelSpec, RuntimeModule
from nnx.models.registry import resolve_model_factory
from nnx.models.topology import WeightsMismatchError
from nnx.params.model import NNModelParams
from nnx.transforms import checkpoint_recipes, replay_transforms
from nnx.transforms.recipe import transform_states

__all__ = ["load_pretrained", "push_to_hub", "save_pretrained"]

#: ``from_pretrained``'s Hub arguments (``hf_hub_download``'s names); nothing else
#: passes through to huggingface_hub.
HUB_DOWNLOAD_ARGS = frozenset({"revision", "cache_dir", "force_download", "local_files_only",
                               "token", "proxies"})
_CARD = """---
library_name: nnx
tags:
- nnx
---

# {name}

An NNx model ({net}) saved with `NNModel.save_pretrained`; loading it needs
`nnx-core` (and, for a repo id, its `hub` extra):

```python
from nnx import NNModel

model = NNModel.from_pretrained("{repo}")
```
"""


def refuse_runtime_save(model: Any, what: str) -> None:
    """MissingModelFactoryError for a runtime module: a portable save must be rebuildable."""
    net = model.params.net
    if isinstance(net, RuntimeModule):
        raise MissingModelFactoryError(
            f"{what}: a Hub save is a portable save, but this model wraps a runtime module "
            f"({net.module}, reconstructible=False) that no factory can rebuild; register a "
            f"model factory and use a ModelSpec, or keep a pickle checkpoint; nothing was "
            f"written")


def save_pretrained(model: Any, save_directory: str | os.PathLike[str], *,
                    repo_id: str | None = None, push: bool = False,
                    push_kwargs: Mapping[str, Any] | None = None) -> str | None:
    """Write ``config.json`` and ``model.safetensors`` (each atomically) into
    ``save_directory``; push it when ``push``. Returns the push's commit URL, else None."""
    what = f"{type(model).__name__}.save_pretrained"
    refuse_runtime_save(model, what)
    if push:
        import_hub(f"{what}(push_to_hub=True)")  # before anything is written
    directory = Path(os.fspath(save_directory))
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{what}: {directory} exists and is not a directory")
    with recording_live_changes(model, salt=None, what=what):  # LiveTopologyError first
        config = encode_config(
            model=model.params.state(),
            net=None if model.net_params is None else model.net_params.state(),
            transforms=transform_states(model),
            model_class=f"{type(model).__module__}.{type(model).__qualname__}")
        weights = encode_weights(model.net.state_dict())
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(directory / WEIGHTS_NAME, weights)
    atomic_write_bytes(directory / CONFIG_NAME, config)
    card = directory / "README.md"
    if not card.exists():  # the model card is the user's once written, as with the mixin
        name = repo_id or directory.name
        net = getattr(model.params.net, "name", str(model.params.net))
        atomic_write_bytes(card, _CARD.format(name=name, net=net, repo=name).encode())
    if not push:
        return None
    return push_to_hub(model, repo_id or directory.name, **dict(push_kwargs or {}))


def push_to_hub(model: Any, repo_id: str, *, commit_message: str = "Push model using NNx",
                private: bool | None = None, token: str | None = None,
                branch: str | None = None, create_pr: bool | None = None,
                allow_patterns: list[str] | str | None = None,
                ignore_patterns: list[str] | str | None = None,
                delete_patterns: list[str] | str | None = None) -> str:
    """Save to a temporary directory and upload it as one commit; the commit URL."""
    what = f"{type(model).__name__}.push_to_hub"
    refuse_runtime_save(model, what)
    hub = import_hub(what)
    api = hub.HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="nnx-hub-") as tmp:
        folder = Path(tmp) / repo_id.rpartition("/")[2]
        save_pretrained(model, folder, repo_id=repo_id)
        repo = api.create_repo(repo_id=repo_id, private=private, exist_ok=True)
        info = api.upload_folder(repo_id=repo.repo_id, folder_path=folder,
                                 commit_message=commit_message, revision=branch,
                                 create_pr=create_pr, allow_patterns=allow_patterns,
                                 ignore_patterns=ignore_patterns,
                                 delete_patterns=delete_patterns)
    return str(info)


def load_pretrained(cls: Any, source: str | os.PathLike[str], *, device: Any = None,
                    batch_adapter: Any = None, task: Any = None,
                    hub_kwargs: Mapping[str, Any], init: Mapping[str, Any]) -> Any:
    """The model ``source`` holds, rebuilt as ``cls`` and loaded (strict)."""
    unknown = sorted(set(hub_kwargs) - HUB_DOWNLOAD_ARGS)
    if unknown:
        raise TypeError(f"{cls.__name__}.from_pretrained got unexpected arguments {unknown}; "
                        f"the Hub ones are {sorted(HUB_DOWNLOAD_ARGS)}")
    config_path = fetch(source, CONFIG_NAME, hub_kwargs)
    config = read_config(config_path)
    where = f"pretrained {os.fspath(source)}"
    params = NNModelParams.from_state(config.model)
    if isinstance(params.net, RuntimeModule):  # save_pretrained never writes one
        raise MissingModelFactoryError(
            f"{where} describes a runtime module ({params.net.module}, reconstructible=False) "
            f"that no factory can rebuild; nothing was loaded")
    if device is not None:
        params = dataclasses.replace(params, device=device)
    if isinstance(params.net, ModelSpec):  # an unknown factory: refused before any download
        resolve_model_factory(params.net)
    recipes = checkpoint_recipes(config.transforms)  # every one resolvable, or refused here
    weights_path = fetch(source, WEIGHTS_NAME, hub_kwargs)
    shapes = weight_shapes(weights_path)  # names and shapes only: no tensor data read yet

    def replay(net: Any) -> object:
        return replay_transforms(net, recipes, base=params.net)

    try:
        model = cls._rebuild(shapes, config.net, params, recipes, replay, where, module=None,
                             batch_adapter=batch_adapter, task=task, **dict(init))
    except WeightsMismatchError:
        raise
    except BUILD_FAILURES as exc:  # config.json declares sizes torch cannot build
        raise unbuildable(Path(config_path), where, exc) from exc
    model.net.load_state_dict(read_weights(weights_path))
    return model
