"""What the fork server of tests/processes.py imports once: the libraries that scripts and saved folders' code
import, and not this package, so that a child can run where the package cannot be imported."""

import sys

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

sys.stdout.flush()  # nothing the imports printed may be copied into every child's output
