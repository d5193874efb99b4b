"""Import paths that moved in 0.7.0 keep working until 0.8.0, each with a `DeprecationWarning` that names its
new home (docs/layout.md lists them). A module that moved whole is found under its old name by a finder that
`import hf_vanilla_transformer` installs; a name that left a module that stays is answered by that module's
`__getattr__` (`moved_name`). This module holds the two tables and imports nothing of the package: a new home
is imported when an old path is used, so no module looks up at the layers above its own."""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

PACKAGE = __name__.rsplit(".", 1)[0]
UNTIL = "0.8.0"

# Old module -> new module.
MOVED_MODULES: dict[str, str] = {
    f"{PACKAGE}.series": f"{PACKAGE}.tasks.series",
    **{
        f"{PACKAGE}.series.{name}": f"{PACKAGE}.tasks.series.{name}"
        for name in (
            "dataset",
            "equivalence",
            "expansion",
            "grammar",
            "renamings",
            "reports",
            "sampling",
            "workers",
        )
    },
    f"{PACKAGE}.data.translation": f"{PACKAGE}.tasks.translation.data",
    f"{PACKAGE}.interop.marian": f"{PACKAGE}.tasks.translation.marian",
    f"{PACKAGE}.evaluation.translating": f"{PACKAGE}.decoding.translating",
    f"{PACKAGE}.evaluation.generation": f"{PACKAGE}.evaluation.scoring",
    f"{PACKAGE}.metrics.tokenized_bleu": f"{PACKAGE}.tasks.translation.tokenized_bleu",
    f"{PACKAGE}.metrics.translation_metrics": f"{PACKAGE}.tasks.translation.translation_metrics",
    f"{PACKAGE}.metrics.series_metrics": f"{PACKAGE}.tasks.series.series_metrics",
    f"{PACKAGE}.metrics.translation_metrics.translation_metrics": (
        f"{PACKAGE}.tasks.translation.translation_metrics.translation_metrics"
    ),
    f"{PACKAGE}.metrics.series_metrics.series_metrics": (
        f"{PACKAGE}.tasks.series.series_metrics.series_metrics"
    ),
}

# (module that stays, name that left it) -> the module that now holds the name, and its name there if renamed
# ("module:name").
MOVED_NAMES: dict[tuple[str, str], str] = {
    **{
        (f"{PACKAGE}.training.arguments", name): f"{PACKAGE}.training.setup"
        for name in (
            "RUN_FILES",
            "RunOptions",
            "build_model",
            "check_lengths_fit",
            "check_processes_train_together",
            "check_streaming",
            "choose_schedule",
            "load_config_overrides",
            "model_config",
            "prepare_output_dir",
            "prepare_training",
            "say_if_finished",
            "set_up_training",
            "trainer_contract",
            "trainer_resume_options",
        )
    },
    (f"{PACKAGE}.evaluation.generation", "check_device"): f"{PACKAGE}.devices",
    (f"{PACKAGE}.decoding.generation", "check_device"): f"{PACKAGE}.devices",
    **{
        (f"{PACKAGE}.evaluation.generation", name): f"{PACKAGE}.decoding.generation"
        for name in (
            "EXTRA_OUTPUT_TOKENS",
            "OPTIONAL_GENERATE_OPTIONS",
            "SourceLengthLimit",
            "check_length_options",
            "check_output_file",
            "default_max_new_tokens",
            "generate_batch",
            "generate_documents",
            "generate_in_batches",
            "generate_texts",
            "generation_settings",
            "join_examples",
            "length_limit",
            "length_sorted_batches",
            "position_limit",
            "source_lengths",
        )
    },
    (f"{PACKAGE}.metrics", "load_translation_metric"): f"{PACKAGE}.tasks.translation.translation_metrics",
    (f"{PACKAGE}.metrics", "TRANSLATION_METRIC_PATH"): f"{PACKAGE}.tasks.translation.translation_metrics",
    (f"{PACKAGE}.metrics", "load_series_metric"): f"{PACKAGE}.tasks.series.series_metrics",
    (f"{PACKAGE}.metrics", "SERIES_METRIC_PATH"): f"{PACKAGE}.tasks.series.series_metrics",
    (f"{PACKAGE}.tokenization", "train_series_tokenizer"): f"{PACKAGE}.tasks.series.tokenizer",
    (f"{PACKAGE}.tokenization", "tutorial_series_tokenizer"): f"{PACKAGE}.tasks.series.tokenizer",
    (f"{PACKAGE}.tokenization", "SERIES_ALPHABET"): f"{PACKAGE}.tasks.series.tokenizer",
    (f"{PACKAGE}.tokenization", "train_translation_tokenizer"): f"{PACKAGE}.tokenization:train_bpe_tokenizer",
    (f"{PACKAGE}.tokenization", "TRANSLATION_ALPHABET"): f"{PACKAGE}.tokenization:WORD_ALPHABET",
    **{
        (f"{PACKAGE}.saving", name): f"{PACKAGE}.interop.updates"
        for name in (
            "GENERATION_CONFIG",
            "check_model_config",
            "folder_repairs",
            "outdated_code_files",
            "slim_generation_config",
            "update_hub_model_code",
            "update_model_code",
        )
    },
}


def _warn(old: str, new: str, stacklevel: int) -> None:
    warnings.warn(
        f"{old} moved to {new} in hf-vanilla-transformer 0.7.0; the old path goes in {UNTIL}.",
        DeprecationWarning,
        stacklevel=stacklevel,  # the user's line: shown where it is `__main__`, and by test runners
    )


def moved_name(module: str, name: str):
    """The object `name` that left `module` (a module's `__getattr__` calls this), or AttributeError."""
    home = MOVED_NAMES.get((module, name))
    if home is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    home, _, new_name = home.partition(":")
    _warn(f"{module}.{name}", f"{home}.{new_name or name}", stacklevel=4)  # past the module's __getattr__
    return getattr(importlib.import_module(home), new_name or name)


class _OldModule(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module's name with its new module."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        _warn(spec.name, MOVED_MODULES[spec.name], stacklevel=3)  # the import system's frames are skipped
        module = importlib.import_module(MOVED_MODULES[spec.name])
        spec.loader_state = module.__spec__  # the import system gives the module the old name's spec next
        return module

    def exec_module(self, module):
        # The new module ran when it was imported: only its own spec is given back.
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    if not any(isinstance(finder, _OldModule) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldModule())
