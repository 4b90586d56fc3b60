"""Print the project's dependencies (plus the named extras) from pyproject.toml, one per line."""

import sys
import tomllib

with open(sys.argv[1], "rb") as handle:
    project = tomllib.load(handle)["project"]
lines = list(project["dependencies"])
for extra in sys.argv[2:]:
    lines.extend(project["optional-dependencies"][extra])
print("\n".join(lines))
