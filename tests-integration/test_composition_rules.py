"""What add-ons compose instead of subclass (issue 25), over every distribution's source.

A task is an object passed as ``NNModel(task=...)`` and a kind of run is an
``UpdateOwner`` passed to the one loop, so no add-on class subclasses ``NNModel``
(``GenerativeNNModel``, whose class the spec names, aside), core's task adapters or
the loop, and no class anywhere subclasses ``FitLoop``. The rest of the add-on rules
(imports only through ``nnx`` and ``nnx.extend``, no ``importlib``, no circle) are the
conformance kit's, which each distribution's own tests call.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.glob("packages/*/src"), ROOT / "tests-integration/example-plugin/src"])
CORE = ROOT / "packages/nnx-core/src"

#: Core classes an add-on composes with and never subclasses.
COMPOSED = frozenset({"NNModel", "TaskAdapter", "LossOnlyAdapter", "FitLoop"})
#: The one spec'd exception: nnx-lm's GenerativeNNModel (spec §15) is an NNModel.
ALLOWED = frozenset({("GenerativeNNModel", "NNModel")})


def _subclasses(src: Path, forbidden: frozenset[str]) -> list[str]:
    found = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name in forbidden and (node.name, name) not in ALLOWED:
                    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    found.append(f"{where}: {node.name}({name})")
    return found


def test_every_distribution_is_scanned():
    names = {p.parent.name for p in SOURCES}
    assert {"nnx-core", "nnx-lm", "nnx-peft", "nnx-diffusion", "nnx-paradigms",
            "example-plugin"} <= names


def test_no_add_on_class_subclasses_what_it_should_compose():
    found = [f for src in SOURCES if src != CORE for f in _subclasses(src, COMPOSED)]
    assert found == []


def test_no_class_subclasses_the_loop():
    found = [f for src in SOURCES for f in _subclasses(src, frozenset({"FitLoop"}))]
    assert found == []


def test_the_scan_sees_a_planted_subclass(tmp_path):
    (tmp_path / "m.py").write_text("import nnx\nclass Mine(nnx.NNModel):\n    pass\n"
                                   "class Gen(GenerativeNNModel):\n    pass\n"
                                   "class GenerativeNNModel(NNModel):\n    pass\n")
    found = _subclasses(tmp_path, COMPOSED)
    assert len(found) == 1 and found[0].endswith("m.py: Mine(NNModel)")
