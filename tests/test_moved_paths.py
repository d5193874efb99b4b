"""The import paths that moved in 0.7.0 keep working until 0.8.0, each with a DeprecationWarning naming its
new home, and docs/layout.md lists every one of them. Each check runs in a fresh process: a module imported
once is not looked up again."""

import subprocess
import sys
from pathlib import Path

from hf_vanilla_transformer._moved import MOVED_MODULES, MOVED_NAMES

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_every_moved_path_is_listed_in_the_layout_page():
    names = [*MOVED_MODULES, *(f"{module}.{name}" for module, name in MOVED_NAMES)]
    missing = [name for name in names if f"`{name}`" not in LAYOUT]
    assert not missing, f"moved import paths that docs/layout.md does not list: {missing}"


def test_every_moved_module_still_imports_as_its_new_home_with_a_warning():
    checks = "\n".join(
        f"import {old}, {new}\n"
        f"assert sys.modules[{old!r}] is sys.modules[{new!r}]\n"
        f"assert sys.modules[{new!r}].__spec__.name == {new!r}"
        for old, new in MOVED_MODULES.items()
    )
    result = _run("import sys\n" + checks)
    assert result.returncode == 0, result.stderr
    for old, new in MOVED_MODULES.items():
        assert f"{old} moved to {new}" in result.stderr


def test_every_moved_name_is_still_found_in_its_old_module_with_a_warning():
    checks, messages = [], []
    for (module, name), target in sorted(MOVED_NAMES.items()):
        home, _, new_name = target.partition(":")
        checks.append(
            f"assert getattr(importlib.import_module({module!r}), {name!r}) is "
            f"getattr(importlib.import_module({home!r}), {new_name or name!r})"
        )
        # A name of a module that moved whole may be found in the new module as it is: the import warned.
        moved = f"{module} moved to {MOVED_MODULES[module]}" if module in MOVED_MODULES else None
        messages.append(moved or f"{module}.{name} moved to {home}.{new_name or name}")
    result = _run("import importlib\n" + "\n".join(checks))
    assert result.returncode == 0, result.stderr
    assert [message for message in messages if message not in result.stderr] == []


def test_a_name_that_never_was_is_still_an_attribute_error():
    result = _run("import hf_vanilla_transformer.saving as s\ns.no_such_name")
    assert (
        "AttributeError: module 'hf_vanilla_transformer.saving' has no attribute 'no_such_name'"
        in result.stderr
    )


def test_a_moved_path_is_told_at_the_users_line_under_pythons_default_filters(tmp_path):
    """Python shows a DeprecationWarning by default only where it points into `__main__`: each warning must
    point at the line that used the old path, not into the package."""
    script = tmp_path / "old_paths.py"
    script.write_text(
        "from hf_vanilla_transformer.tokenization import SERIES_ALPHABET\n"
        "import hf_vanilla_transformer.data.translation\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert (
        f"{script}:1: DeprecationWarning: hf_vanilla_transformer.tokenization.SERIES_ALPHABET moved"
        in result.stderr
    )
    assert f"{script}:2: DeprecationWarning: hf_vanilla_transformer.data.translation moved" in result.stderr
