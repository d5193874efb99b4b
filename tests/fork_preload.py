"""What the fork server of tests/processes.py imports once: the libraries that scripts and saved folders' code
import, and not this package, so that a child can run where the package cannot be imported."""

import accelerate  # noqa: F401
import datasets  # noqa: F401
import tokenizers  # noqa: F401
import torch  # noqa: F401
from transformers import (  # noqa: F401
    AutoConfig,
    AutoModel,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    GenerationConfig,
    HfArgumentParser,
    PreTrainedModel,
    Seq2SeqTrainer,
    pipeline,
)
