"""Every option of every command-line script explains itself in `--help`.

Each script's `main()` runs until it parses its arguments; the parse is intercepted and the parser, as the
script built it (argparse or `HfArgumentParser` dataclasses), is inspected, so no script does any work.
"""

import argparse
import importlib
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
# scripts/benchmarks/ holds the benchmark's library and a worker that reads a JSON job on stdin: no CLIs.
CLI_SCRIPTS = sorted(path.stem for path in SCRIPTS.glob("*.py"))


class _Parsed(Exception):
    """Raised instead of parsing, carrying the parser."""


def built_parser(script: str, monkeypatch) -> argparse.ArgumentParser:
    def intercept(parser, args=None, namespace=None):
        raise _Parsed(parser)

    # parse_args and HfArgumentParser.parse_args_into_dataclasses both go through parse_known_args.
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", intercept)
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / f"{script}.py")])
    module = importlib.import_module(script)  # scripts/ is on sys.path (conftest.py)
    assert Path(module.__file__).parent == SCRIPTS, f"'import {script}' found {module.__file__}"
    with pytest.raises(_Parsed) as parsed:
        module.main()
    return parsed.value.args[0]


def test_the_scripts_are_found():
    assert {"train", "train_accelerate", "prepare_translation", "quickstart", "benchmark"} <= set(CLI_SCRIPTS)


@pytest.mark.parametrize("script", CLI_SCRIPTS)
def test_every_option_has_help(script, monkeypatch):
    parser = built_parser(script, monkeypatch)
    options = [action for action in parser._actions if action.option_strings]
    assert len(options) > 1, f"{script}.py: no options besides --help"
    missing = [
        "/".join(action.option_strings)
        for action in options
        if action.help != argparse.SUPPRESS and not (action.help or "").strip()
    ]
    assert not missing, f"{script}.py: options without help text: {', '.join(missing)}"
    parser.format_help()  # a stray % in a help text only fails here
