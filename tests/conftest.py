import os

# No test may reach the Hub: fail fast instead of hanging on the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pytest-xdist runs one test process per core: each gets its share of the cores for torch's thread pool, and
# so do the processes it starts. Without this, every process spins a thread per core, and OpenMP threads
# that outnumber the cores wait on each other.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from hf_vanilla_transformer import (  # noqa: E402
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
)

# The longest test files run first. pytest-xdist hands out whole files in collection order (`--dist
# loadfile --no-loadscope-reorder` in pyproject.toml), so these start at once and the short files fill the
# other workers around them, instead of a long file starting last and running alone. `--durations` lists the
# slowest tests.
LONGEST_FIRST = ("test_deepspeed.py", "test_scale_out.py", "test_wmt14_recipe.py", "test_accelerate_loop.py")
LONGEST_FIRST += ("test_train_scripts.py", "test_fault_matrix.py", "test_benchmark.py")
LONGEST_FIRST += ("test_shipped_models.py", "test_translate.py")


def pytest_collection_modifyitems(items):
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


TINY_VOCAB = 40


def tiny_config(**overrides) -> VanillaTransformerConfig:
    """A model small enough for unit tests: d_model 32, 2+2 layers, 4 heads, vocabulary of 40 (unless
    overridden)."""
    return VanillaTransformerConfig.from_preset("transformer-tiny", **{"vocab_size": TINY_VOCAB, **overrides})


@pytest.fixture
def tiny_model() -> VanillaTransformerForConditionalGeneration:
    torch.manual_seed(0)
    return VanillaTransformerForConditionalGeneration(tiny_config()).eval()


@pytest.fixture
def padded_batch() -> dict[str, torch.Tensor]:
    """Three source rows of lengths 7, 4 and 6 (token ids 4.., no specials), right-padded with 0."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(4, TINY_VOCAB, (3, 7), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    for row, length in enumerate((7, 4, 6)):
        input_ids[row, length:] = 0
        attention_mask[row, length:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


WORDS = "ein hund läuft im park a dog runs in the park zwei katzen schlafen two cats sleep".split()


@pytest.fixture(scope="session")
def word_tokenizer():
    return make_word_tokenizer()


def make_word_tokenizer():
    """A word-level tokenizer with the package's special-token ids (<pad> 0, <s> 1, </s> 2, <unk> 3),
    built in memory so that model tests do not depend on tokenizer training."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(["<pad>", "<s>", "</s>", "<unk>", *dict.fromkeys(WORDS)])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=64,
    )


FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"


@pytest.fixture(scope="module")
def translation_data(tmp_path_factory):
    """The fixture corpus as a saved DatasetDict, and a small joint BPE tokenizer trained on it."""
    from hf_vanilla_transformer.tasks.translation.data import load_parallel_text
    from hf_vanilla_transformer.tokenization import train_bpe_tokenizer

    folder = tmp_path_factory.mktemp("multi30k")
    load_parallel_text(FIXTURE, "de", "en").save_to_disk(folder / "data")
    train_bpe_tokenizer(
        [FIXTURE / "train.de.gz", FIXTURE / "train.en.gz"],
        vocab_size=400,
        show_progress=False,
        model_max_length=128,
        output_dir=folder / "tokenizer",
    )
    return folder
