"""Every ```python block of every docs/*.md page runs, in order, as written.

A page is one story: its blocks run in one namespace, from an empty working
directory of its own, so a block may use what an earlier block on the same page
defined and nothing else (no hidden setup). A page that trains under
``distributed=DDP()`` runs as the single rank of a one-process torchrun world
(the launcher's four variables set, nothing else changed). The quickstart runs in
test_doc_snippets.py, which also checks its printed run ids and CLI lines.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(p for p in (ROOT / "docs").glob("*.md")
               if p.name != "quickstart.md" and "```python" in p.read_text(encoding="utf-8"))

# Each page imports and trains a few tiny runs: a few seconds apiece.
pytestmark = pytest.mark.slow


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", page.read_text(encoding="utf-8"), re.M | re.S)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_pages_are_found() -> None:
    assert len(PAGES) >= 10, PAGES  # the glob must not silently match nothing


def test_the_quickstart_links_every_page() -> None:
    quickstart = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([a-z0-9-]+\.md)", quickstart))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"quickstart.md"}
    assert pages - linked == set(), "docs pages the quickstart does not link"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_block_of_the_page_runs_in_order(page: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(page)
    if any("DDP(" in block for block in blocks):
        for name, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"),
                            ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(free_port()))):
            monkeypatch.setenv(name, value)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny nets; CI's two cores are shared
    namespace: dict[str, object] = {"__name__": f"__docs_{page.stem}__"}
    try:
        for i, code in enumerate(blocks):
            # dont_inherit: this file's __future__ import must not turn the page's
            # annotations into strings (a dataclass then looks up its module).
            exec(compile(code, f"docs/{page.name} block {i + 1}", "exec", dont_inherit=True),
                 namespace)
    finally:
        torch.set_num_threads(threads)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()  # a page that left a group open
