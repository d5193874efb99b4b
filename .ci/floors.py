"""Print a pip constraints file that pins every dependency of pyproject.toml (extras included) to its floor,
`name>=X` becoming `name==X`: CI's floor pass installs with it, so every floor the project claims is one CI ran."""

import re
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
requirements = list(project["dependencies"])
for extra in project.get("optional-dependencies", {}).values():
    requirements += extra
floors = {}
for requirement in requirements:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9][^,;\s]*).*", requirement.strip())
    if match:
        floors[match.group(1).lower()] = match.group(2)
print("\n".join(f"{name}=={version}" for name, version in sorted(floors.items())))
