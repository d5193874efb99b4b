"""docs/api.md is the public API: every name a module exports (`__all__`), every command at the top of
scripts/ with its options, and each built-in task's options. The page and the code must agree both ways: a
public name or an option removed from the code, or added without the page, fails here, so a change to what
users import or type is made on the page too (and, for a removal, in docs/changelog.md).

Modules are read with `ast` for their `__all__` and imported to check that each name is there; a command's
options are those of the parser its `main()` builds (`test_script_help.built_parser`), the Trainer's own
options aside (transformers documents those)."""

import ast
import importlib
import re
from pathlib import Path

import pytest

from .test_script_help import CLI_SCRIPTS, built_parser

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hf_vanilla_transformer"
PAGE = ROOT / "docs" / "api.md"
NAME = re.compile(r"`([^`]+)`")


def page_sections() -> dict[str, set[str]]:
    """The page's lists: for each `### <heading>`, the names in backticks on its lines that start with
    "Names:" or "Options:" (prose around them may name anything)."""
    sections: dict[str, set[str]] = {}
    heading = None
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("### "):
            heading = NAME.search(line).group(1)
            sections[heading] = set()
        elif heading is not None and line.startswith(("Names:", "Options:")):
            sections[heading] |= set(NAME.findall(line))
    return sections


def exporting_modules() -> dict[str, list[str]]:
    """Every module of the package that sets `__all__` at its top, with the names it lists."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
                parts = path.relative_to(ROOT).with_suffix("").parts
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                modules[name] = ast.literal_eval(node.value)
    return modules


def test_the_page_lists_every_exported_name_and_only_those():
    sections = page_sections()
    modules = exporting_modules()
    assert "hf_vanilla_transformer" in modules and "hf_vanilla_transformer.training" in modules
    for module, names in modules.items():
        assert module in sections, f"docs/api.md has no section for {module}, which exports {names}"
        listed = sections[module]
        assert not set(names) - listed, f"{module} exports names docs/api.md lacks: {set(names) - listed}"
        assert not listed - set(names), (
            f"docs/api.md lists names {module} no longer exports (removed? say so in docs/changelog.md): "
            f"{listed - set(names)}"
        )
        imported = importlib.import_module(module)
        assert all(hasattr(imported, name) for name in names), [n for n in names if not hasattr(imported, n)]
    modules_on_page = {heading for heading in sections if heading.startswith("hf_vanilla_transformer")}
    assert not modules_on_page - set(modules), f"sections of modules that export nothing: {modules_on_page}"


def command_options(script: str, monkeypatch) -> set[str]:
    from hf_vanilla_transformer.cli import own_fields

    parser = built_parser(script, monkeypatch)
    if hasattr(parser, "dataclass_types"):
        return {f"--{field.name}" for dtype in parser.dataclass_types for field in own_fields(dtype)}
    return {
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


@pytest.mark.parametrize("script", CLI_SCRIPTS)
def test_the_page_lists_every_option_of_each_command_and_only_those(script, monkeypatch):
    heading = f"scripts/{script}.py"
    sections = page_sections()
    assert heading in sections, f"docs/api.md has no section for {heading}"
    options = command_options(script, monkeypatch)
    listed = sections[heading]
    assert not options - listed, f"{heading} has options docs/api.md lacks: {sorted(options - listed)}"
    assert not listed - options, (
        f"docs/api.md lists options {heading} no longer has (removed? say so in docs/changelog.md): "
        f"{sorted(listed - options)}"
    )


def test_the_page_lists_each_built_in_tasks_options():
    import dataclasses

    from hf_vanilla_transformer.tasks import get_task

    sections = page_sections()
    for name in ("translation", "series"):
        options = {f"--{field.name}" for field in dataclasses.fields(get_task(name).options) if field.init}
        listed = sections[f"--task {name}"]
        assert options == listed, (f"--task {name}", sorted(options ^ listed))


def test_every_command_on_the_top_of_scripts_has_a_section():
    sections = page_sections()
    commands = {heading for heading in sections if heading.startswith("scripts/")}
    assert commands == {f"scripts/{script}.py" for script in CLI_SCRIPTS}
