"""The optional dependencies, pyproject.toml's extras: a feature that needs one imports it through `require`
(or `lazy_module`), so that the core install imports none of them and a missing one is one line that names
the install adding it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import UserError

# The extra that installs each optional module (pyproject.toml's [project.optional-dependencies]).
EXTRA_OF = {
    "symengine": "series",
    "matplotlib": "plot",
    "ctranslate2": "ctranslate2",
    "sentencepiece": "marian",
    "gradio": "demo",
    "deepspeed": "deepspeed",
}


class MissingExtraError(UserError, ImportError):
    """A feature's optional dependency is not installed."""


def require(module: str, feature: str) -> ModuleType:
    """Import `module` (one of `EXTRA_OF`'s, or a submodule), or raise `MissingExtraError` naming `feature`
    and the `pip install` that adds it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        top = module.split(".")[0]
        extra = EXTRA_OF[top]
        raise MissingExtraError(
            f"{feature} needs {top}, which is not installed: pip install 'hf-vanilla-transformer[{extra}]' "
            f"(in a clone of the repository: pip install -e '.[{extra}]')."
        ) from error


class lazy_module:  # noqa: N801 (stands in for a module name)
    """A module-level name for an optional module, imported through `require` when first used: importing
    the module that holds it never fails, and using it without the extra is `MissingExtraError`."""

    def __init__(self, module: str, feature: str):
        self._name, self._feature, self._module = module, feature, None

    def load(self) -> ModuleType:
        if self._module is None:
            self._module = require(self._name, self._feature)
        return self._module

    def __getattr__(self, attribute: str):
        return getattr(self.load(), attribute)
