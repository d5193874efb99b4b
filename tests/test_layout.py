"""docs/layout.md holds: the installed package is the library and every module in it looks down. Read from
the source with `ast` (nothing is imported), so a new upward import or an application put back into the
package fails here, naming the file."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hf_vanilla_transformer"

# docs/layout.md's layers, bottom first: a module may import its own part of the package and the layers
# below its part's, never a layer above, and no import runs in a circle, inside a part or across parts.
LAYERS = (
    ("validation",),
    ("configuration_vanilla_transformer", "errors", "sentences", "stopping"),
    (
        "modeling_vanilla_transformer",
        "pipeline_seq2seq",
        "extras",
        "options",
        "readers",
        "locks",
        "caches",
        "devices",
    ),
    ("metrics", "saving", "outputs", "lengths"),
    ("data", "tokenization"),
    ("tasks",),
    ("interop",),
    ("decoding",),
    ("training", "evaluation"),
    ("cli", "__init__"),
)
LAYER = {part: level for level, parts in enumerate(LAYERS) for part in parts}


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
            if _part(module) != own and LAYER[_part(module)] >= LAYER[own]
        }
    )
    assert not upward, f"{path.relative_to(ROOT)} ({own}, layer {LAYER[own]}) imports {upward}: a layer above"


def _module_file(module: str) -> Path | None:
    """The file that runs for `module` ('hf_vanilla_transformer.tasks.base': tasks/base.py), if it is ours."""
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def import_graph() -> dict[Path, set[Path]]:
    """Each module of the package -> the modules it imports (at its top or inside a function)."""
    graph = {}
    for path in MODULES:
        targets = {_module_file(module) for module in _imported_modules(path)}
        graph[path] = {target for target in targets if target is not None and target != path}
    return graph


def circles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """The strongly connected parts of `graph` with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_import_of_the_package_names_a_module_of_it():
    """A relative import one dot short (`from ..saving` in `tasks/translation/`) names a module that is not
    there: it fails only when its function runs, and the checks above would not see its arrow."""
    missing = set()
    for path in MODULES:
        package = list(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level and node.module:  # `from .x import y`: x
                modules = [".".join(package[: len(package) - node.level + 1] + [node.module])]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:  # `from . import y`: y is a module or a name of the package's face
                continue
            for module in modules:
                if module.split(".")[0] == PACKAGE.name and _module_file(module) is None:
                    missing.add(f"{path.relative_to(PACKAGE)}:{node.lineno}: {module}")
    assert not missing, f"imports of modules the package does not have: {sorted(missing)}"


def test_no_import_runs_in_a_circle():
    """A circle of imports, even through an import inside a function, ties its modules into one: none of them
    can be understood, tested or moved alone."""
    found = [[str(path.relative_to(PACKAGE)) for path in circle] for circle in circles(import_graph())]
    assert not found, f"modules that import each other in a circle: {found}"


def test_the_circle_check_finds_a_circle():
    a, b, c = (PACKAGE / name for name in ("a.py", "b.py", "c.py"))
    assert circles({a: {b}, b: {c}, c: {a}}) == [sorted([a, b, c])]
    assert circles({a: {b}, b: {c}, c: set()}) == []


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


# The built-in tasks, each a package of `tasks/` named as its task (the registry finds them so).
TASK_NAMES = {path.parent.name for path in (PACKAGE / "tasks").glob("*/__init__.py")}
# A task's own package, and the registry with its tests: the only places a task's name is written.
TASK_HOMES = (PACKAGE / "tasks",)


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


def _imports_a_task(path: Path) -> list[str]:
    """The built-in tasks' packages that `path` imports (`hf_vanilla_transformer.tasks.series.grammar`)."""
    return sorted(
        module
        for module in _imported_modules(path)
        if len(module.split(".")) > 2 and module.split(".")[1:3] in ([["tasks", name] for name in TASK_NAMES])
    )


def test_task_knowledge_has_one_home():
    """Outside the tasks' own packages (`tasks/`), no code names a task: it asks the registry for the task
    object. No module of the package outside `tasks/` imports a task's package either (the commands may:
    `generate_series.py` is the series task's data script). The configuration file, which travels in saved
    folders, holds no list of tasks."""
    from hf_vanilla_transformer.tasks import registered_tasks

    assert {"translation", "series"} <= TASK_NAMES <= set(registered_tasks())
    found = {}
    for path in sorted([*MODULES, *(ROOT / "scripts").rglob("*.py")]):
        if any(path == home or home in path.parents for home in TASK_HOMES):
            continue
        lines = _names_a_task(ast.parse(path.read_text(encoding="utf-8")))
        imports = _imports_a_task(path) if path in MODULES else []
        if lines or imports:
            found[str(path.relative_to(ROOT))] = lines + imports
    assert not found, f"code that names a task outside its own package: {found}"


def test_the_check_finds_what_it_looks_for():
    code = """
TASKS = ("translation", "series")
if config.task == "series": pass
DataArguments(task="translation")
"""
    assert _names_a_task(ast.parse(code)) == [2, 3, 4]


def test_the_check_finds_an_import_of_a_tasks_package(tmp_path, monkeypatch):
    module = PACKAGE / "training" / "trainer.py"
    monkeypatch.setattr(
        Path, "read_text", lambda self, encoding=None: "from ..tasks.series.grammar import X\n"
    )
    assert _imports_a_task(module) == ["hf_vanilla_transformer.tasks.series.grammar"]


# The top level of scripts/ is the commands a user runs; research and measurement tools are in
# scripts/benchmarks/ (docs/layout.md). A command whose name has one of these is a measurement's.
MEASUREMENT_WORDS = ("bench", "profil", "timing", "time_", "_time", "estimat", "measur", "screenshot")
MEASUREMENT_WORDS += ("curve", "gpus")


def _top_level_script_problems(scripts: Path, documents: list[Path]) -> list[str]:
    """What is wrong with the top level of `scripts`: a command that no document names as
    `scripts/<name>`, and one that is a research or measurement tool (named like one, or named as a file of
    `scripts/benchmarks/`)."""
    import re

    text = "\n".join(document.read_text(encoding="utf-8") for document in documents)
    benchmarks = {path.name for path in (scripts / "benchmarks").glob("*.py")}
    problems = []
    for path in sorted(scripts.glob("*.py")):
        if not re.search(rf"(?<![\w./-])scripts/{re.escape(path.name)}(?!\w)", text):
            problems.append(f"scripts/{path.name}: named in no user document as scripts/{path.name}")
        if path.name in benchmarks or any(word in path.stem for word in MEASUREMENT_WORDS):
            problems.append(f"scripts/{path.name}: a research or measurement tool, for scripts/benchmarks/")
    return problems


def _user_documents(root: Path) -> list[Path]:
    """The README and docs/*.md: what a user reads (docs/experiments/ is the research record, not that)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def test_the_top_level_of_scripts_is_the_documented_user_commands():
    """Every .py at the top of scripts/ is a command a user runs, named as `scripts/<name>` in the README
    or docs/*.md; a benchmark, profile, timing, estimate, screenshot or GPU check is not: it goes in
    scripts/benchmarks/."""
    problems = _top_level_script_problems(ROOT / "scripts", _user_documents(ROOT))
    assert not problems, "\n".join(problems)


def test_the_scripts_check_finds_an_undocumented_command_and_a_measurement_tool(tmp_path):
    scripts = tmp_path / "scripts"
    (scripts / "benchmarks").mkdir(parents=True)
    for name in ("train.py", "translate.py", "benchmark_speed.py", "quality_curve.py"):
        (scripts / name).write_text("", encoding="utf-8")
    (scripts / "benchmarks" / "quality_curve.py").write_text("", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("python scripts/train.py\n", encoding="utf-8")
    mentions = "`scripts/quality_curve.py`, scripts/benchmarks/translate.py\n"
    (tmp_path / "docs" / "x.md").write_text(mentions, encoding="utf-8")
    assert _top_level_script_problems(scripts, _user_documents(tmp_path)) == [
        "scripts/benchmark_speed.py: named in no user document as scripts/benchmark_speed.py",
        "scripts/benchmark_speed.py: a research or measurement tool, for scripts/benchmarks/",
        "scripts/quality_curve.py: a research or measurement tool, for scripts/benchmarks/",
        "scripts/translate.py: named in no user document as scripts/translate.py",
    ]


def house_counts(root: Path = ROOT) -> dict:
    """The package's import graph counted by its parts (top-level modules and subpackages, as `LAYERS` names
    them): parts, import edges between parts, the longest chain of parts that import each other (its layers),
    arrows back up (an import of a higher layer), circles among parts and among modules, and lines."""
    files = {path: _part(".".join(path.relative_to(ROOT).with_suffix("").parts)) for path in MODULES}
    graph = import_graph()
    edges = {(files[a], files[b]) for a, targets in graph.items() for b in targets if files[a] != files[b]}
    parts = set(files.values())
    by_part = {part: {b for a, b in edges if a == part} for part in parts}
    part_circles = circles(by_part)
    in_circle = {part: tuple(circle) for circle in part_circles for part in circle}

    def depth(part, seen=()):
        group = in_circle.get(part, (part,))
        below = {b for member in group for b in by_part[member]} - set(group) - set(seen)
        return 1 + max((depth(b, (*seen, *group)) for b in below), default=0)

    return {
        "modules": len(parts),
        "layers": max(depth(part) for part in parts),
        "import edges": len(edges),
        "arrows back up": sum(LAYER.get(b, 0) > LAYER.get(a, 0) for a, b in edges),
        "circles of parts": len(part_circles),
        "circles of modules": len(circles(graph)),
        "lines": sum(len(path.read_text(encoding="utf-8").splitlines()) for path in MODULES),
    }


if __name__ == "__main__":  # python tests/test_layout.py: the counts docs/layout.md quotes
    print(", ".join(f"{name} {value}" for name, value in house_counts().items()))
