"""The README snippet and docs/quickstart.md run as written (so they cannot rot).

Each page's code runs in-process from an empty temporary working directory:
the README's "What you get today" block alone, and every ```python block of
the quickstart in order in one namespace, then the quickstart's
``uv run nnx runs ...`` lines through the CLI's ``main``. A run id a page
prints in a ``# Run saved to runs/<id>`` comment must be the one its code
prints. Install commands (``pip install``, ``uv sync``) are not run.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from nnx.cli import main as nnx_cli

ROOT = Path(__file__).resolve().parent.parent
SAVED = re.compile(r"Run saved to (runs/[0-9a-f]{32})\b")
CLAIMED = re.compile(r"^# Run saved to (runs/[0-9a-f]{32})$", re.M)


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, re.M | re.S)


def readme_snippet() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## What you get today", 1)[1].split("\n## ", 1)[0]
    (snippet,) = blocks(section, "python")
    return snippet


@pytest.fixture
def empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny nets; CI's two cores are shared
    yield tmp_path
    torch.set_num_threads(threads)


def run_blocks(snippets: list[str], name: str) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": f"__{name}__"}
    for i, code in enumerate(snippets):
        exec(compile(code, f"{name} block {i + 1}", "exec"), namespace)
    return namespace


def test_readme_snippet_runs_and_prints_the_run_id_it_claims(
        empty_cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snippet = readme_snippet()
    (claimed,) = CLAIMED.findall(snippet)
    run_blocks([snippet], "readme")
    printed = SAVED.findall(capsys.readouterr().out)
    assert printed == [claimed]
    assert (empty_cwd / claimed / "run.yaml").is_file()


def test_every_quickstart_block_runs_in_order(
        empty_cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    snippets = blocks(text, "python")
    assert len(snippets) >= 10, "the quickstart's python blocks were not found"
    run_blocks(snippets, "quickstart")
    printed = SAVED.findall(capsys.readouterr().out)
    claimed = [c for code in snippets for c in CLAIMED.findall(code)]
    assert claimed and set(claimed) <= set(printed), (claimed, printed)

    commands = [line for code in blocks(text, "bash") for line in code.splitlines()
                if line.startswith("uv run nnx runs ")]
    assert {shlex.split(c)[4] for c in commands} == {"list", "show", "verify"}
    for command in commands:
        argv = shlex.split(command.split("#", 1)[0])[3:]  # drop "uv run nnx"
        assert nnx_cli(argv) == 0, command
        out = capsys.readouterr().out
        if argv[1] == "verify":  # one line per resume point, every one whole
            assert "ok  last" in out and "FAIL" not in out, out
        else:  # list and show name the first run
            assert claimed[0].removeprefix("runs/") in out, (command, out)


def test_the_quickstart_has_the_sections_the_spec_cites() -> None:
    # nnx-concepts.md cites "Quickstart → Batch sizes", "§2.2" (a weights-only warm start
    # may switch precision) and "§2.13" (a categorical PredictionResult).
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    assert "Batch sizes" in headings
    two_two = next(h for h in headings if h.startswith("2.2 "))
    assert "weights-only warm start" in two_two
    two_thirteen = next(h for h in headings if h.startswith("2.13 "))
    assert "Predictions" in two_thirteen
    section = text.split(f"### {two_two}", 1)[1].split("\n### ", 1)[0]
    assert "weights_only" in section and "Precision.BF16" in section
    section = text.split(f"### {two_thirteen}", 1)[1].split("\n## ", 1)[0]
    assert "categorical" in section and "PredictionResult" in section
