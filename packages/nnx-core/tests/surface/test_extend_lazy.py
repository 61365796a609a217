"""nnx.extend resolves its names lazily (issue 37): importing it loads torch and no
module of core's layers; each name is its home module's object; the type checkers'
block lists the same names from the same modules as the runtime table."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import nnx.extend as extend


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def test_importing_nnx_extend_loads_no_torch_and_no_core_module() -> None:
    out = _fresh("import sys, nnx.extend; "
                 "print('torch' in sys.modules, sorted(m for m in sys.modules "
                 "if m.startswith('nnx')))")
    assert out == "False ['nnx', 'nnx.extend']"


def test_the_run_file_readers_and_numpy_terms_load_no_torch() -> None:
    # What nnx.comparison and nnx.calibration take from nnx.extend at import.
    names = ("load_yaml, read_provenance, epoch_ends, sha256_hex, canonical_bytes, "
             "check_count, Params, model_fingerprint, softmax64, nll_terms, brier_terms, "
             "atomic_write_text, frozen_mapping, require_distribution, Ok, Err")
    assert _fresh(f"import sys; from nnx.extend import {names}; "
                  "print('torch' in sys.modules)") == "False"


def test_each_name_is_its_home_modules_object() -> None:
    for name, module in extend._EXPORTS.items():
        assert getattr(extend, name) is getattr(importlib.import_module(module), name), name


def test_all_and_dir_list_the_table() -> None:
    assert extend.__all__ == sorted(extend._EXPORTS)
    assert [n for n in dir(extend) if not n.startswith("_")] == extend.__all__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        extend.nope  # noqa: B018
    assert not hasattr(extend, "nope")


def test_the_type_checking_block_matches_the_table() -> None:
    tree = ast.parse(Path(extend.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If))
    typed = {alias.asname: node.module for node in block.body
             if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert typed == extend._EXPORTS
