"""docs/architecture.md and docs/one-batch.md are true to the code (issue 37).

Three pins:

* every file either page names exists: a backticked ``*.py`` path (``nnx/...`` in any
  distribution's ``src/``; ``_engine/fit_loop.py`` under nnx-core's ``nnx/``;
  ``src/...`` and ``tests/...`` under nnx-core; ``tools/...`` and the like from the
  repository root; a bare ``update_window.py`` in some distribution's ``src/``), and
  every backticked dotted ``nnx.a.b`` resolves: to a module, a name defined in one, an
  entry-point group, a planned subpackage (tools/planned_names.toml), or a name core
  spells as a string (a component's or a registry's);
* architecture.md's layer table names every module of each private folder it lists
  (``_engine/``, ``_persistence/``, ...), so a split or a new module shows up there;
* one-batch.md walks a real batch: a tiny ``NNModel.train`` on one batch, traced with
  ``sys.setprofile`` (and ``threading.setprofile``, for the commit's writer thread) in a
  fresh interpreter, enters every nnx-core file the page names,
  and every file of the engine and surface layers (``nnx/_engine``, ``_contracts``,
  ``tasks``, ``objectives``, ``metrics``, ``callbacks``, ``transforms``, ``_surface``)
  entered while ``FitLoop.run_batch`` runs is named on the page. The foundation,
  configuration and persistence files a batch passes through (records, enums, the
  net) are helpers the page may name but need not: they hold no per-batch decision.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CORE_SRC = ROOT / "packages" / "nnx-core" / "src"
CORE = CORE_SRC / "nnx"
SOURCES = sorted(p / "src" for p in (ROOT / "packages").iterdir() if (p / "src").is_dir())
PAGES = ("architecture.md", "one-batch.md")
FROM_ROOT = ("tools/", "tests-integration/", "packages/", "examples/", "docs/", ".ci/",
             ".github/")

#: The per-batch files one-batch.md must name: the engine and surface layers
#: (packages/nnx-core/tests/test_layers.py's LAYERS), where the batch's decisions live.
PER_BATCH_PREFIXES = ("nnx/_engine/", "nnx/_contracts/", "nnx/tasks/", "nnx/objectives/",
                      "nnx/metrics/", "nnx/callbacks/", "nnx/transforms/", "nnx/_surface/")


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def named_files(text: str) -> set[str]:
    return set(re.findall(r"`([\w./-]+\.py)`", text))


def file_exists(ref: str) -> bool:
    if ref.startswith("nnx/"):
        return any((src / ref).is_file() for src in SOURCES)
    if ref.startswith(("tests/", "src/")):
        return (ROOT / "packages" / "nnx-core" / ref).is_file()
    if ref.startswith(FROM_ROOT):
        return (ROOT / ref).is_file()
    if "/" not in ref:
        return any(any(src.rglob(ref)) for src in SOURCES)
    return (CORE / ref).is_file()


def _listed_names() -> set[str]:
    """Every distribution's entry-point groups, and the planned subpackages."""
    names: set[str] = set()
    for pyproject in ROOT.glob("packages/*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        names |= set(project.get("entry-points", {}))
    planned = tomllib.loads((ROOT / "tools" / "planned_names.toml").read_text(encoding="utf-8"))
    for table in planned.values():
        names |= set(table.get("subpackages", ()))
    return names


def _module_file(dotted: str) -> Path | None:
    for src in SOURCES:
        base = src.joinpath(*dotted.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def dotted_resolves(name: str, listed: set[str]) -> bool:
    if name in listed:
        return True
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module_file(".".join(parts[:cut]))
        if module is None:
            continue
        rest = parts[cut:]
        # A name the module defines, imports or lists in a lazy table.
        if not rest or re.search(rf"\b{re.escape(rest[0])}\b",
                                 module.read_text(encoding="utf-8")):
            return True
        break
    spelled = f'"{name}"'
    return any(spelled in p.read_text(encoding="utf-8") for p in CORE.rglob("*.py"))


@pytest.mark.parametrize("name", PAGES)
def test_every_file_the_page_names_exists(name: str) -> None:
    files = named_files(page(name))
    assert files, f"{name} names no file: the pattern no longer matches its references"
    missing = sorted(ref for ref in files if not file_exists(ref))
    assert missing == [], f"{name} names files that do not exist: {missing}"


@pytest.mark.parametrize("name", PAGES)
def test_every_dotted_nnx_name_the_page_names_resolves(name: str) -> None:
    listed = _listed_names()
    names = set(re.findall(r"`(nnx(?:\.\w*[a-zA-Z]\w*)+)(?:\(\))?`", page(name)))
    unknown = sorted(n for n in names if not dotted_resolves(n, listed))
    assert unknown == [], f"{name} names what the code does not hold: {unknown}"


def _layer_rows() -> list[tuple[list[str], str]]:
    rows = []
    for line in page("architecture.md").splitlines():
        cells = line.split("|")
        if len(cells) >= 4 and re.match(r" (\d\. \w+|faces) ", cells[1]):
            rows.append((re.findall(r"`(_\w+)/`", cells[2]), cells[3]))
    return rows


def test_the_layer_table_names_every_module_of_its_private_folders() -> None:
    rows = _layer_rows()
    assert len(rows) == 6, "the layer table's rows were not found"
    unnamed = []
    for folders, what in rows:
        named = set(re.findall(r"`(\w+)", what))
        for folder in folders:
            for module in sorted((CORE / folder).glob("*.py")):
                if module.stem != "__init__" and module.stem not in named:
                    unnamed.append(f"{folder}/{module.name}")
    assert unnamed == [], f"modules docs/architecture.md's layer table does not name: {unnamed}"


TRACE = r"""
import json, sys, tempfile, threading
from pathlib import Path
import nnx
from nnx.testing import tiny_batches, tiny_model, tiny_train_params

src = str(Path(nnx.__file__).parent.parent)
entered, per_batch, depth = set(), set(), [0]

def profile(frame, event, arg):
    if event not in ("call", "return"):
        return
    code = frame.f_code
    name = code.co_filename
    if not name.startswith(src):
        return
    rel = Path(name).relative_to(src).as_posix()
    # The batch runs in the training thread; the commit's writer thread (profiled too)
    # may write the previous epoch meanwhile, which is not the batch's work.
    training = threading.current_thread() is threading.main_thread()
    if training and code.co_name == "run_batch" and rel == "nnx/_engine/fit_loop.py":
        depth[0] += 1 if event == "call" else -1
    if event == "call":
        entered.add(rel)
        if depth[0] and training:
            per_batch.add(rel)

model, params = tiny_model(), tiny_train_params(tiny_batches(1))
with tempfile.TemporaryDirectory() as root:
    sys.setprofile(profile)
    threading.setprofile(profile)  # the background commit's writer
    try:
        model.train(params, root=root, verbose=False)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
print(json.dumps({"entered": sorted(entered), "per_batch": sorted(per_batch)}))
"""


@pytest.fixture(scope="module")
def one_batch() -> dict[str, list[str]]:
    """The nnx-core files one batch's run enters, traced in a fresh interpreter (no
    cache another test warmed hides a call)."""
    done = subprocess.run([sys.executable, "-c", TRACE], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_trace_sees_the_batch(one_batch: dict[str, list[str]]) -> None:
    # The trace keys on FitLoop.run_batch: renamed or moved, it would see nothing.
    assert "nnx/_engine/steps.py" in one_batch["per_batch"], one_batch["per_batch"]


def test_every_file_one_batch_names_is_entered(one_batch: dict[str, list[str]]) -> None:
    named = {ref for ref in named_files(page("one-batch.md")) if ref.startswith("nnx/")}
    assert sorted(named - set(one_batch["entered"])) == []


def test_one_batch_names_every_engine_file_a_batch_enters(
        one_batch: dict[str, list[str]]) -> None:
    named = named_files(page("one-batch.md"))
    needed = {ref for ref in one_batch["per_batch"] if ref.startswith(PER_BATCH_PREFIXES)}
    assert sorted(needed - named) == []
