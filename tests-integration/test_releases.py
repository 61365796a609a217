"""releases.toml (issue 37): every distribution's released versions, each with the commit
it was released from, which the lowest-core cells build an older nnx-core from."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def _releases_module():
    spec = importlib.util.spec_from_file_location("_releases", ROOT / "tools" / "_releases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_releases = _releases_module()
ReleasesError, allows = _releases.ReleasesError, _releases.allows
lowest_release, read_releases = _releases.lowest_release, _releases.read_releases


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def test_every_distribution_is_recorded_at_a_commit_carrying_that_version():
    releases = read_releases()
    folders = {p.name: p for p in sorted((ROOT / "packages").iterdir())
               if (p / "pyproject.toml").is_file()}
    names = {tomllib.loads((p / "pyproject.toml").read_text())["project"]["name"]: p
             for p in folders.values()}
    assert sorted(releases) == sorted(names)
    shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    for name, versions in releases.items():
        rel = names[name].relative_to(ROOT).as_posix()
        for version, commit in versions.items():
            found = _git("cat-file", "-e", f"{commit}^{{commit}}")
            assert found.returncode == 0, (
                f"{name} {version}: commit {commit} is not in this clone"
                + (" (a shallow clone: fetch the full history)" if shallow else ""))
            shown = _git("show", f"{commit}:{rel}/pyproject.toml")
            assert shown.returncode == 0, shown.stderr
            project = tomllib.loads(shown.stdout)["project"]
            assert (project["name"], project["version"]) == (name, version)


def test_a_malformed_releases_file_is_refused(tmp_path):
    path = tmp_path / "releases.toml"
    path.write_text('[nnx-core]\n"0.1.0" = "3778bd0"\n')
    with pytest.raises(ReleasesError, match=r"nnx-core 0\.1\.0 = '3778bd0' is not a full 40-hex"):
        read_releases(path)
    path.write_text('[nnx-core]\n"latest" = "' + "a" * 40 + '"\n')
    with pytest.raises(ReleasesError, match="cannot read the version 'latest'"):
        read_releases(path)
    path.write_text("nnx-core = 1\n")
    with pytest.raises(ReleasesError, match=r"\[nnx-core\] must map versions to commits"):
        read_releases(path)


def test_the_lowest_release_a_range_allows():
    assert allows(">=0.1,<0.2", "0.1.0") and not allows(">=0.1,<0.2", "0.2.0")
    assert lowest_release(">=0.1,<0.2", ["0.1.3", "0.1.0", "0.2.0"]) == "0.1.0"
    assert lowest_release(">=0.1.1,<0.2", ["0.1.3", "0.1.0", "0.2.0"]) == "0.1.3"
    with pytest.raises(ReleasesError, match="no lower bound"):
        lowest_release("<0.2", ["0.1.0"])
