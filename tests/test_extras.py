"""The core install and the extras: what `import hf_vanilla_transformer` and the core modules load, and what a
feature says when its extra is missing. Each case runs a fresh interpreter in which the extras' modules cannot
be imported (`sys.modules[name] = None` makes `import name` fail as if it were not installed)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hf_vanilla_transformer.extras import EXTRA_OF
from hf_vanilla_transformer.saving import save_model_folder

ROOT = Path(__file__).resolve().parents[1]
BLOCK_EXTRAS = "import sys\nfor name in {names!r}: sys.modules[name] = None\n"


def _python(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    prelude = BLOCK_EXTRAS.format(names=sorted(EXTRA_OF))
    return subprocess.run(
        [sys.executable, "-c", prelude + code, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


# Runs each script of a JSON list of command lines in turn, in one interpreter (each would import the same
# libraries), and prints [exit status, stderr] for each.
RUN_SCRIPTS = """
import contextlib, io, json, runpy
results = []
for argv in json.loads(sys.argv[1]):
    sys.argv[:] = argv
    stderr, code = io.StringIO(), 0
    with contextlib.redirect_stderr(stderr):
        try:
            runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as exit_:
            code = exit_.code
    results.append([code, stderr.getvalue()])
print(json.dumps(results))
"""


@pytest.fixture
def model_dir(tmp_path, tiny_model, word_tokenizer):
    return save_model_folder(tiny_model, word_tokenizer, tmp_path / "model")


def test_each_optional_module_is_in_the_extra_named_for_it():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in EXTRA_OF.items():
        assert any(requirement.split(">=")[0] == module for requirement in extras[extra]), (module, extra)
    listed = {
        requirement.split(">=")[0]
        for name, requirements in extras.items()
        if name != "dev"
        for requirement in requirements
        if not requirement.startswith("hf-vanilla-transformer")
    }
    assert listed == set(EXTRA_OF)


def test_the_core_modules_and_scripts_import_without_any_extra(tmp_path):
    code = (
        "import hf_vanilla_transformer\n"
        "import hf_vanilla_transformer.training, hf_vanilla_transformer.tasks\n"
        "import hf_vanilla_transformer.saving\n"
        "import hf_vanilla_transformer.evaluation.scoring, hf_vanilla_transformer.tokenization\n"
        "import hf_vanilla_transformer.tasks.series.dataset\n"
        "import hf_vanilla_transformer.tasks.series.equivalence\n"
        "import hf_vanilla_transformer.tasks.translation.marian\n"
        # The scripts whose features need an extra import without it too (`--help` works).
        f"sys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
        "import plot_attention, quickstart, demo\n"
        "print('imported')\n"
    )
    result = _python(code, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "imported", result.stderr[-3000:]


def test_a_feature_without_its_extra_is_one_line_naming_the_install(tmp_path, model_dir):
    model = ("--model", str(model_dir))
    cases = [
        (("generate_series.py", "--num_examples", "50", "--output_dir", str(tmp_path / "data")), "series"),
        (("plot_attention.py", *model, "--text", "ein hund"), "plot"),
        (("export_ctranslate2.py", *model, "--output_dir", str(tmp_path / "c")), "ctranslate2"),
        (("convert_marian.py", *model, "--output_dir", str(tmp_path / "m")), "marian"),
    ]
    argvs = [[str(ROOT / "scripts" / args[0]), *args[1:]] for args, _ in cases]
    result = _python(RUN_SCRIPTS, json.dumps(argvs), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    for (args, extra), (code, stderr) in zip(cases, json.loads(result.stdout), strict=True):
        # One message; before it, at most the progress bar of loading a model.
        errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
        assert code == 2 and len(errors) == 1, (args, stderr[-3000:])
        assert "Traceback" not in stderr and stderr.strip().endswith(errors[0])
        assert f"pip install 'hf-vanilla-transformer[{extra}]'" in errors[0]
    assert not (tmp_path / "data").exists() and not (tmp_path / "c").exists()


def test_training_without_the_plot_extra_keeps_its_log_and_warns_once(tmp_path):
    code = (
        "import logging\n"
        "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(message)s')\n"
        "from hf_vanilla_transformer.training.logs import LossLog\n"
        f"log = LossLog({str(tmp_path / 'run')!r})\n"
        "log.write(1, {'loss': 2.0}); log.plot(); log.write(2, {'loss': 1.5}); log.plot()\n"
    )
    result = _python(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and "hf-vanilla-transformer[plot]" in warnings[0]
    assert (tmp_path / "run" / "loss_log.jsonl").read_text().count("\n") == 2
    assert not (tmp_path / "run" / "loss_curves.png").exists()
