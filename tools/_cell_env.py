"""What may be installed in an à-la-carte cell's venv, checked inside that venv.

A cell holds the checked distribution (with the extras it asked for), what it declares,
transitively, the test tools (pytest, pytest-xdist) and the distribution's own ``test``
dependency group, and nothing else: a test tool that pulled in, say, scipy would let a
distribution import scipy undeclared and still pass its cell. tools/check_alacarte.py
runs :data:`ENV_CHECK` with the venv's python (``packaging`` comes with pytest).
"""

from __future__ import annotations

# Every installed distribution must be reachable from the roots (argv[1]: a JSON list of
# [name, [extras]]) through declared requirements whose markers hold; prints the
# environment, one name a line, and exits non-zero naming what is beyond it.
ENV_CHECK = """
import json, re, sys
from importlib import metadata
from packaging.requirements import Requirement
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
installed = {norm(d.metadata["Name"]): d for d in metadata.distributions()}
todo = [(norm(n), frozenset(e)) for n, e in json.loads(sys.argv[1])]
reached = set()
while todo:
    name, extras = todo.pop()
    if (name, extras) in reached or name not in installed:
        continue
    reached.add((name, extras))
    for text in installed[name].requires or []:
        req = Requirement(text)
        envs = [{"extra": e} for e in extras] or [{"extra": ""}]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            todo.append((norm(req.name), frozenset(req.extras)))
wanted = {name for name, _ in reached}
for name in sorted(installed):
    print(("  " if name in wanted else "  UNDECLARED ") + name + " " + installed[name].version)
extra = sorted(set(installed) - wanted)
if extra:
    sys.exit("installed but declared neither by the distribution, nor by a test tool or "
             "its test group: " + ", ".join(extra))
"""
