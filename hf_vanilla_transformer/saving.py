"""Write a self-contained model folder: what `from_pretrained`, `pipeline()` and Hub users need."""

from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase, pipeline

from .pipeline_seq2seq import TASK_NAME


def save_model_folder(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: str | Path) -> Path:
    """Save weights (safetensors), config with `auto_map`, the modeling/configuration code, generation config,
    tokenizer, and the `seq2seq-generation` pipeline (`custom_pipelines` in config.json plus its code).

    The folder then loads in a process that never imported this package:
    `AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)`,
    `AutoTokenizer.from_pretrained(folder)`, and `pipeline(model=folder, trust_remote_code=True)`.
    """
    folder = Path(folder)
    # Saving through the pipeline records `custom_pipelines` and copies the pipeline's code with the model's.
    pipe = pipeline(TASK_NAME, model=model, tokenizer=tokenizer, device=model.device)
    pipe.save_pretrained(folder)
    return folder
