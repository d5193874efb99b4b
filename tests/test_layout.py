"""docs/layout.md holds: the installed package is the library and every module in it looks down. Read from
the source with `ast` (nothing is imported), so a new upward import or an application put back into the
package fails here, naming the file."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hf_vanilla_transformer"

# docs/layout.md's layers, bottom first: a module may import its own part of the package and the layers
# below its part's, never a layer above.
LAYERS = (
    ("configuration_vanilla_transformer", "errors", "sentences"),
    ("modeling_vanilla_transformer", "pipeline_seq2seq", "extras", "outputs", "options", "readers"),
    ("metrics", "saving"),
    ("series",),
    ("data",),
    ("tokenization",),
    ("tasks",),
    ("interop",),
    ("training", "evaluation"),
    ("cli", "__init__"),
)
LAYER = {part: level for level, parts in enumerate(LAYERS) for part in parts}
# evaluate loads the series metric by its path, as a script of its own; it imports the series grammar from
# the installed package (docs/layout.md).
UPWARD_BY_DESIGN = {("metrics/series_metrics/series_metrics.py", "series")}
# Bringing an old folder up to date asks its task, when it is called, whether the task's texts are sentences.
UPWARD_BY_DESIGN.add(("saving.py", "tasks"))


def _part(module: str) -> str:
    """'hf_vanilla_transformer.training.trainer' -> 'training'; the package itself -> '__init__'."""
    names = module.split(".")
    return names[1] if len(names) > 1 else "__init__"


def _imported_modules(path: Path):
    """Every module of the package that `path` imports, at its top or inside a function."""
    package = list(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(
                    package[: len(package) - node.level + 1] + ([node.module] if node.module else [])
                )
                names = [base] if node.module else [f"{base}.{alias.name}" for alias in node.names]
            else:
                names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        yield from (name for name in names if name.split(".")[0] == PACKAGE.name)


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_of_the_package_has_a_layer():
    parts = {_part(".".join(path.relative_to(ROOT).with_suffix("").parts)) for path in MODULES}
    assert parts == set(LAYER), f"not in LAYERS: {parts - set(LAYER)}; gone: {set(LAYER) - parts}"


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_every_module_looks_down(path):
    own = _part(".".join(path.relative_to(ROOT).with_suffix("").parts))
    upward = sorted(
        {
            _part(module)
            for module in _imported_modules(path)
            if _part(module) != own
            and LAYER[_part(module)] >= LAYER[own]
            and (str(path.relative_to(PACKAGE)), _part(module)) not in UPWARD_BY_DESIGN
        }
    )
    assert not upward, f"{path.relative_to(ROOT)} ({own}, layer {LAYER[own]}) imports {upward}: a layer above"


def test_the_package_holds_no_application():
    """The commands and the research tooling live in scripts/; the wheel carries none of their modules."""
    for name in ("demo.py", "quickstart.py", "visualization.py", "benchmarks"):
        assert not (PACKAGE / name).exists(), (
            f"hf_vanilla_transformer/{name}: an application, see docs/layout.md"
        )
    gui = {"gradio", "matplotlib"}  # the demo page and plots; the library draws loss curves on request only
    for path in MODULES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        imported = {
            alias.name.split(".")[0] for node in top if isinstance(node, ast.Import) for alias in node.names
        }
        imported |= {(node.module or "").split(".")[0] for node in top if isinstance(node, ast.ImportFrom)}
        assert not imported & gui, f"{path.relative_to(ROOT)} imports {imported & gui} when imported"


TASK_NAMES = {"translation", "series"}
# A task's own module, and the registry with its tests: the only places a task's name is written.
TASK_HOMES = (PACKAGE / "tasks", PACKAGE / "series")


def _names_a_task(tree: ast.AST) -> list[int]:
    """Lines that know about a task by its name: a comparison of something named `...task...` with a task's
    name, a `task=` argument or default given one, a table keyed by the task names or a list of them (the
    closed list a configuration file once held), or a registry's entry stored under one. ("translation" alone
    is also the column of translation data, which names no task.)"""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = any(isinstance(o, ast.Constant) and o.value in TASK_NAMES for o in operands)
            if named and any("task" in ast.unparse(o).lower() for o in operands):
                lines.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg == "task":
            if isinstance(node.value, ast.Constant) and node.value.value in TASK_NAMES:
                lines.append(node.value.lineno)
        elif isinstance(node, ast.Dict):
            if TASK_NAMES <= {k.value for k in node.keys if isinstance(k, ast.Constant)}:
                lines.append(node.lineno)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            if TASK_NAMES <= {e.value for e in node.elts if isinstance(e, ast.Constant)}:
                lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):  # a registry's entry
            registry = isinstance(node.value, ast.Name) and node.value.id.isupper()
            if registry and isinstance(node.slice, ast.Constant) and node.slice.value in TASK_NAMES:
                lines.append(node.lineno)
    return lines


def test_task_knowledge_has_one_home():
    """Outside a task's own module (`tasks/`, `series/`), no code names a task: it asks the registry for the
    task object. The configuration file, which travels in saved folders, holds no list of tasks."""
    from hf_vanilla_transformer.tasks import registered_tasks

    assert TASK_NAMES <= set(registered_tasks())
    found = {}
    for path in sorted([*MODULES, *(ROOT / "scripts").rglob("*.py")]):
        if any(path == home or home in path.parents for home in TASK_HOMES):
            continue
        lines = _names_a_task(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[str(path.relative_to(ROOT))] = lines
    assert not found, f"code that names a task outside its own module: {found}"


def test_the_check_finds_what_it_looks_for():
    code = """
TASKS = ("translation", "series")
if config.task == "series": pass
DataArguments(task="translation")
"""
    assert _names_a_task(ast.parse(code)) == [2, 3, 4]
