"""Which nnx distribution provides which add-on name.

Only used to turn a miss into an actionable install hint (``pip install
nnx-lm``); resolution itself always goes through the entry-point groups. The
data is generated from every distribution's ``[project.entry-points]`` by
``tools/gen_catalog.py`` (``_catalog_generated.py``; CI runs it with ``--check``),
so an add-on's pyproject is the only list of its names and adding one needs no
edit here.
"""

from __future__ import annotations

from nnx._foundation._catalog_generated import PROVIDERS, SUBPACKAGES

#: Catalog kind of each entry-point group (the plain groups and the ``id@vN`` ones).
GROUP_KINDS: dict[str, str] = {
    "nnx.exports": "export",
    "nnx.nets": "net",
    "nnx.model_factories": "model_factory",
    "nnx.optimizer_factories": "optimizer_factory",
    "nnx.metrics": "metric",
    "nnx.transforms": "transform",
    "nnx.calibration_readers": "calibration_reader",
}

# A group core does not read cannot give a hint; test_extension_api refuses one in a
# pyproject, so every generated group is a known one.
_INDEX: dict[tuple[str, str], str] = {
    (GROUP_KINDS[group], name): dist
    for group, names in PROVIDERS.items() if group in GROUP_KINDS
    for name, dist in names.items()
}


def distribution_for(kind: str, name: str) -> str | None:
    """The distribution that provides ``name`` of ``kind``, if known.

    ``kind`` is ``"export"``, ``"net"``, or a versioned registry's kind
    (``"model_factory"``, ``"optimizer_factory"``, ``"metric"``, ``"transform"``),
    whose names are ``id@vN``.
    """
    return _INDEX.get((kind, name))


def distribution_for_subpackage(module: str) -> str | None:
    """The distribution that ships the subpackage ``module`` (``nnx.search``), if known."""
    return SUBPACKAGES.get(module)


def catalog() -> dict[str, dict[str, tuple[str, ...]]]:
    """Kind → distribution → names (sorted): the whole table, for checks and docs."""
    table: dict[str, dict[str, list[str]]] = {kind: {} for kind in GROUP_KINDS.values()}
    for (kind, name), dist in sorted(_INDEX.items()):
        table[kind].setdefault(dist, []).append(name)
    return {kind: {d: tuple(n) for d, n in dists.items()} for kind, dists in table.items()}
