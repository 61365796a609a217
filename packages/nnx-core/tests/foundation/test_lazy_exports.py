"""Packages whose names load on first use (nnx._foundation.lazy_exports, issue 38): every
public import path still reads the same object, a submodule's name keeps its exported
object, and the type checkers' block lists the table name for name."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

LAZY_PACKAGES = ("nnx.callbacks", "nnx.nets", "nnx.objectives", "nnx.provenance",
                 "nnx.transforms")


def _fresh(code: str) -> list[str]:
    """What ``code`` prints in a fresh interpreter, split into words."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_each_name_is_its_home_modules_object(name: str) -> None:
    package = importlib.import_module(name)
    for export, module in package._EXPORTS.items():
        assert getattr(package, export) is getattr(importlib.import_module(module), export)


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_all_and_dir_list_the_table(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__ == sorted(package._EXPORTS)
    assert set(package._EXPORTS) <= set(dir(package))


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_the_type_checking_block_matches_the_table(name: str) -> None:
    package = importlib.import_module(name)
    tree = ast.parse(Path(package.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If))
    typed = {alias.asname: node.module for node in block.body
             if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert typed == package._EXPORTS


def test_an_unknown_name_is_an_attribute_error() -> None:
    import nnx.provenance

    with pytest.raises(AttributeError, match=r"'nnx\.provenance' has no attribute 'nope'"):
        nnx.provenance.nope  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'nope'"):
        from nnx.provenance import nope  # noqa: F401


def test_a_submodule_of_an_exported_name_keeps_the_exported_object() -> None:
    # nnx.provenance.compare is the function, as the eager __init__ made it, even when
    # the submodule of the same name was imported before the package's name was read.
    code = ("import nnx.provenance.compare as m; from nnx.provenance.compare import Comparison; "
            "from nnx.provenance import compare; import nnx.provenance as p; "
            "print(callable(compare) and compare is p.compare and compare.__name__, "
            "type(m).__name__)")
    assert _fresh(code) == ["compare", "function"]


def test_star_import_reads_every_name() -> None:
    code = ("from nnx.provenance import *; from nnx.callbacks import *; "
            "from nnx.objectives import *; from nnx.transforms import *; "
            "print(begin_attempt.__module__, WandbCallback.__module__, "
            "FrozenTeacher.__module__, LowRankLinear.__module__)")
    assert _fresh(code) == ["nnx.provenance.attempt", "nnx.callbacks.wandb",
                                   "nnx.objectives.teacher", "nnx.transforms.low_rank"]
