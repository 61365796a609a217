"""Which nnx distribution provides which add-on name.

Only used to turn a miss into an actionable install hint (``pip install
nnx-lm``); resolution itself always goes through the entry-point groups. Keep
this table in step with each add-on's ``[project.entry-points]``.
"""

from __future__ import annotations

_EXPORTS: dict[str, tuple[str, ...]] = {
    "nnx-peft": (
        "apply_lora_to", "apply_dora_to", "LoRALinear", "DoRALinear", "save_lora_weights",
        "AdapterLayer", "PrefixTuner", "PromptTuner",
        "load_lora_weights", "merge_lora", "unmerge_lora", "lora_recipe", "dora_recipe",
        "ia3_recipe",
        "save_prefix_weights", "load_prefix_weights", "save_prompt_weights", "load_prompt_weights",
        "IA3Linear", "apply_ia3_to", "save_ia3_weights", "load_ia3_weights",
    ),
    "nnx-diffusion": (
        "NoiseSchedulers", "NoiseSchedule", "DiffusionMLP", "DiffusionObjective",
        "diffusion_train_step_factory", "diffusion_objective", "sample",
    ),
    "nnx-paradigms": (
        "kd_train_step_factory", "feature_kd_train_step_factory", "simclr_train_step_factory",
        "mixup_train_step_factory", "cutmix_train_step_factory", "moe_train_step_factory",
        "jepa_train_step_factory", "dpo_train_step_factory", "jepa_objective",
        "nt_xent_loss",
        "NNPreferenceDataset",
        "born_again_train", "TeacherRecord", "TeacherRecordError", "TeacherDataset",
        "read_teacher_records", "evaluate_offline",
    ),
    "nnx-lm": (
        "TransformerNN", "NNTransformerParams", "NNTransformerParamsBuilder",
        "GenerativeNNModel", "NNTokenizerParams", "LogitsChain", "RMSNorm", "RoPE",
    ),
    "nnx-viz": ("VisUtils", "lr_finder"),
    "nnx-graph": ("NNGraphDataset", "GraphConvNN", "GraphSageNN", "GraphAttNN"),
    "nnx-search": ("SearchSpace",),
    # The reference plugin under tests-integration/: proves the mechanics end to
    # end and is the template for third-party add-ons.
    "nnx-example-plugin": ("ExampleScaler",),
}

_NETS: dict[str, tuple[str, ...]] = {
    "nnx-lm": ("TRANSFORMER",),
    "nnx-graph": ("GRAPH_CONV", "GRAPH_SAGE", "GRAPH_ATT"),
    "nnx-example-plugin": ("EXAMPLE_MLP",),
}

# The versioned registries' entries an add-on provides, named ``id@vN`` exactly as
# its entry points are (planned names for distributions not built yet).
_MODEL_FACTORIES: dict[str, tuple[str, ...]] = {}

_OPTIMIZER_FACTORIES: dict[str, tuple[str, ...]] = {
    "nnx-example-plugin": ("example.sgd@v1",),
}

_METRICS: dict[str, tuple[str, ...]] = {
    "nnx-paradigms": ("label_accuracy@v1", "label_nll@v1"),
}

_TRANSFORMS: dict[str, tuple[str, ...]] = {
    "nnx-peft": ("nnx.lora@v1", "nnx.dora@v1", "nnx.ia3@v1"),
}

#: Catalog kind of each entry-point group (the plain groups and the ``id@vN`` ones).
GROUP_KINDS: dict[str, str] = {
    "nnx.exports": "export",
    "nnx.nets": "net",
    "nnx.model_factories": "model_factory",
    "nnx.optimizer_factories": "optimizer_factory",
    "nnx.metrics": "metric",
    "nnx.transforms": "transform",
}

_TABLES: dict[str, dict[str, tuple[str, ...]]] = {
    "export": _EXPORTS,
    "net": _NETS,
    "model_factory": _MODEL_FACTORIES,
    "optimizer_factory": _OPTIMIZER_FACTORIES,
    "metric": _METRICS,
    "transform": _TRANSFORMS,
}

_INDEX: dict[tuple[str, str], str] = {
    (kind, name): dist
    for kind, table in _TABLES.items()
    for dist, names in table.items()
    for name in names
}


def distribution_for(kind: str, name: str) -> str | None:
    """The distribution that provides ``name`` of ``kind``, if known.

    ``kind`` is ``"export"``, ``"net"``, or a versioned registry's kind
    (``"model_factory"``, ``"optimizer_factory"``, ``"metric"``, ``"transform"``),
    whose names are ``id@vN``.
    """
    return _INDEX.get((kind, name))


def catalog() -> dict[str, dict[str, tuple[str, ...]]]:
    """Kind → distribution → names: the whole table, for checks and docs."""
    return {kind: dict(table) for kind, table in _TABLES.items()}
