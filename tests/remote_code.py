"""Run a script the way a Hub user runs a saved folder: a fresh Python process in which this package cannot be
imported, so that everything comes from the folder's own code files (`trust_remote_code=True`)."""

import json
import textwrap
from pathlib import Path

from .script_runner import run_code

# Put first on sys.meta_path: any import of the package fails, as it would where it is not installed.
BLOCK_PACKAGE = textwrap.dedent(
    """
    import sys

    class _NoPackage:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "hf_vanilla_transformer":
                raise ModuleNotFoundError(f"{name!r} is blocked: the folder's code must suffice")

    sys.meta_path.insert(0, _NoPackage())
    """
)


def run_without_package(script: str, *args: str, cwd: Path) -> dict:
    """Run `script` (dedented) with `args` as sys.argv[1:]; it prints one JSON object on its last line."""
    result = run_code(BLOCK_PACKAGE + textwrap.dedent(script), *args, cwd=cwd)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
