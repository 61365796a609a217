"""The releases file (``releases.toml`` at the root) and which release a range's lowest is.

``releases.toml`` maps each distribution to its released versions and the commit each
was released from. tools/check_alacarte.py's lowest-core cell asks :func:`lowest_release`
which nnx-core an add-on's declared range lets an installer pick at the bottom, and
builds it from its recorded commit when the workspace's nnx-core is not that version.

Standard library only (tomllib; on Python 3.10, the tomli that pytest brings).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (a workspace venv's tests load this): pytest's own TOML reader
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ROOT / "releases.toml"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_BOUND = re.compile(r"(>=|==|~=|<=|<|>|!=)\s*([0-9][0-9a-zA-Z.*]*)")


class ReleasesError(Exception):
    """The releases file is malformed, or no recorded release fits a range."""


def read_releases(path: Path = RELEASES) -> dict[str, dict[str, str]]:
    """Distribution -> {version: full commit id}, as recorded in ``path``."""
    try:
        table = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ReleasesError(f"cannot read {path}: {exc}") from exc
    releases: dict[str, dict[str, str]] = {}
    for dist, versions in table.items():
        if not isinstance(versions, dict) or not versions:
            raise ReleasesError(f"{path.name}: [{dist}] must map versions to commits")
        for version, commit in versions.items():
            release_key(version)  # refuses a version it cannot order
            if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
                raise ReleasesError(f"{path.name}: {dist} {version} = {commit!r} is not a "
                                    f"full 40-hex commit id")
        releases[dist] = dict(versions)
    return releases


def release_key(version: str) -> tuple[int, ...]:
    """``0.1`` and ``0.1.0`` -> ``(0, 1)``: the numeric release, trailing zeros dropped,
    so a range's ``0.1`` and a wheel's ``0.1.0`` compare equal."""
    m = re.match(r"\d+(\.\d+)*", version.strip())
    if not m:
        raise ReleasesError(f"cannot read the version {version!r}")
    parts = [int(p) for p in m.group(0).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def lower_bound(specifier: str) -> str:
    """The version a ``>=`` / ``==`` / ``~=`` clause of ``specifier`` starts at."""
    bounds: list[str] = [v for op, v in _BOUND.findall(specifier) if op in (">=", "==", "~=")]
    if not bounds:
        raise ReleasesError(f"no lower bound in {specifier or 'an empty range'!r}")
    return max(bounds, key=release_key)


def allows(specifier: str, version: str) -> bool:
    """Whether ``version`` satisfies every clause of ``specifier`` (numeric releases
    only: enough for the ``>=0.1,<0.2`` ranges the distributions declare)."""
    key = release_key(version)
    for op, bound in _BOUND.findall(specifier):
        b = release_key(bound.rstrip(".*"))
        ok = {">=": key >= b, "==": key == b, "~=": key >= b, "<=": key <= b,
              "<": key < b, ">": key > b, "!=": key != b}[op]
        if not ok:
            return False
    return True


def lowest_release(specifier: str, versions: list[str]) -> str:
    """The lowest of ``versions`` that ``specifier`` allows, i.e. what an installer
    resolving to the lowest versions picks; refuses when none fits."""
    lower_bound(specifier)  # a range with no floor has no lowest release to test
    fitting = [v for v in versions if allows(specifier, v)]
    if not fitting:
        raise ReleasesError(f"none of {', '.join(versions) or 'no versions'} satisfies "
                            f"{specifier!r}")
    return min(fitting, key=release_key)
