"""hf_vanilla_transformer: the Transformer of "Attention Is All You Need" as a native transformers v5 model.

Importing the package loads nothing heavy: its names (`VanillaTransformerConfig`, the models, the pipeline)
are imported on first use, so that a command answers `--help` before torch is loaded. The model is registered
with transformers whenever it can be used: as soon as the configuration, the model or the pipeline module is
imported (from here or directly), or transformers' Auto classes or pipelines are, whichever comes first. Then
`AutoConfig`, `AutoModel` and `AutoModelForSeq2SeqLM` know the model, `pipeline("seq2seq-generation")` is a
task, and the classes are registered for auto class, so that `save_pretrained` writes an `auto_map` and
copies the code, and a saved folder loads with `trust_remote_code=True` in a process that never imported
this package.
"""

import importlib.abc
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .configuration_vanilla_transformer import PRESETS, VanillaTransformerConfig
    from .modeling_vanilla_transformer import (
        VanillaTransformerForConditionalGeneration,
        VanillaTransformerModel,
        VanillaTransformerPreTrainedModel,
        shift_tokens_right,
    )
    from .pipeline_seq2seq import TASK_NAME as PIPELINE_TASK
    from .pipeline_seq2seq import Seq2SeqGenerationPipeline

__version__ = "1.1.0"

__all__ = [
    "PIPELINE_TASK",
    "PRESETS",
    "Seq2SeqGenerationPipeline",
    "VanillaTransformerConfig",
    "VanillaTransformerForConditionalGeneration",
    "VanillaTransformerModel",
    "VanillaTransformerPreTrainedModel",
    "shift_tokens_right",
]

# Each public name: the module that defines it and its name there.
_EXPORTS = {
    "PIPELINE_TASK": ("pipeline_seq2seq", "TASK_NAME"),
    "PRESETS": ("configuration_vanilla_transformer", "PRESETS"),
    "Seq2SeqGenerationPipeline": ("pipeline_seq2seq", "Seq2SeqGenerationPipeline"),
    "VanillaTransformerConfig": ("configuration_vanilla_transformer", "VanillaTransformerConfig"),
    "VanillaTransformerForConditionalGeneration": (
        "modeling_vanilla_transformer",
        "VanillaTransformerForConditionalGeneration",
    ),
    "VanillaTransformerModel": ("modeling_vanilla_transformer", "VanillaTransformerModel"),
    "VanillaTransformerPreTrainedModel": (
        "modeling_vanilla_transformer",
        "VanillaTransformerPreTrainedModel",
    ),
    "shift_tokens_right": ("modeling_vanilla_transformer", "shift_tokens_right"),
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = getattr(_import(module), attribute)
    globals()[name] = value  # asked once: later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _import(module: str):
    """One of the package's model modules, imported (and so registered: `_RegisterAfterImport`)."""
    if module == "configuration_vanilla_transformer":
        from . import configuration_vanilla_transformer as imported
    elif module == "modeling_vanilla_transformer":
        from . import modeling_vanilla_transformer as imported
    else:
        from . import pipeline_seq2seq as imported
    return imported


def _register_config(module) -> None:
    from transformers import AutoConfig

    config = module.VanillaTransformerConfig
    AutoConfig.register(config.model_type, config, exist_ok=True)
    config.register_for_auto_class()


def _register_models(module) -> None:
    from transformers import AutoModel, AutoModelForSeq2SeqLM

    config = module.VanillaTransformerConfig
    AutoModel.register(config, module.VanillaTransformerModel, exist_ok=True)
    AutoModelForSeq2SeqLM.register(config, module.VanillaTransformerForConditionalGeneration, exist_ok=True)
    module.VanillaTransformerModel.register_for_auto_class("AutoModel")
    module.VanillaTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")


def _task_input_rules(task: str | None) -> tuple:
    # The registry loads the tasks' code (datasets among it): on a pipeline's first input, not at import.
    from .tasks.registry import input_rules

    return input_rules(task)


def _register_pipeline(module) -> None:
    module.register_pipeline()
    module.INPUT_RULES = _task_input_rules  # the registry's tasks say how their models take inputs


# What registers each of the package's model modules, run as soon as the module is imported.
_REGISTRATIONS = {
    f"{__name__}.configuration_vanilla_transformer": _register_config,
    f"{__name__}.modeling_vanilla_transformer": _register_models,
    f"{__name__}.pipeline_seq2seq": _register_pipeline,
}
# transformers' modules whose users expect the model known, and the package's module each needs for it.
_TRANSFORMERS_USERS = {
    "transformers.models.auto.configuration_auto": "configuration_vanilla_transformer",
    "transformers.models.auto.modeling_auto": "modeling_vanilla_transformer",
    "transformers.pipelines": "pipeline_seq2seq",
}


def _after_import(name: str, module) -> None:
    if name in _REGISTRATIONS:
        _REGISTRATIONS[name](module)
        return
    # One of transformers' Auto or pipeline modules: the package's module registers itself as it is imported.
    # Already imported, even part way (transformers' module imported while the package's is), it has or will.
    ours = _TRANSFORMERS_USERS[name]
    if f"{__name__}.{ours}" not in sys.modules:
        _import(ours)


class _RunAfterExec(importlib.abc.Loader):
    """A module's own loader, followed by `_after_import` once the module has run whole."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def __getattr__(self, name: str):  # get_source, get_filename, is_package, ...: the loader's own
        if name == "loader":  # not set yet (a copy being made): no loader to ask
            raise AttributeError(name)
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        _after_import(module.__name__, module)


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Finds the modules `_after_import` watches with the finders after it, and has their loaders run it.
    Python offers no hook after an import; this finder is how one is made (as `wrapt`'s import hooks are)."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _REGISTRATIONS and fullname not in _TRANSFORMERS_USERS:
            return None
        for finder in sys.meta_path:
            if isinstance(finder, _RegisterAfterImport) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _RunAfterExec(spec.loader)
                return spec
        return None


if not any(isinstance(finder, _RegisterAfterImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterImport())
# Imported before the package was: their users may ask for the model now.
for _name in _TRANSFORMERS_USERS:
    if _name in sys.modules:
        _after_import(_name, sys.modules[_name])
del _name
