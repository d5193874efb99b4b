"""hf_vanilla_transformer: the Transformer of "Attention Is All You Need" as a native transformers v5 model.

Importing the package registers the model with the Auto classes (`AutoConfig`, `AutoModel`,
`AutoModelForSeq2SeqLM`) and registers the classes for auto class, so that `save_pretrained` writes an
`auto_map` and copies the code, and a saved folder loads with `trust_remote_code=True` in a process
that never imported this package.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from . import pipeline_seq2seq
from .configuration_vanilla_transformer import PRESETS, VanillaTransformerConfig
from .modeling_vanilla_transformer import (
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
    VanillaTransformerPreTrainedModel,
    shift_tokens_right,
)
from .pipeline_seq2seq import TASK_NAME as PIPELINE_TASK
from .pipeline_seq2seq import Seq2SeqGenerationPipeline, register_pipeline

AutoConfig.register(VanillaTransformerConfig.model_type, VanillaTransformerConfig, exist_ok=True)
AutoModel.register(VanillaTransformerConfig, VanillaTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(
    VanillaTransformerConfig, VanillaTransformerForConditionalGeneration, exist_ok=True
)

VanillaTransformerConfig.register_for_auto_class()
VanillaTransformerModel.register_for_auto_class("AutoModel")
VanillaTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

register_pipeline()


def _task_input_rules(task: str | None) -> tuple:
    # The registry loads the tasks' code (datasets among it): on a pipeline's first input, not at import.
    from .tasks.registry import input_rules

    return input_rules(task)


pipeline_seq2seq.INPUT_RULES = _task_input_rules  # the registry's tasks say how their models take inputs

__version__ = "1.0.0"

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
