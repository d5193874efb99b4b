"""The control for test_common_vanilla_transformer.py: transformers' common model tests on MarianMTModel,
with the same harness (tests/transformers_common.py) and the settings transformers' own Marian tests use
(`test_missing_keys` off: Marian's tied embeddings are saved once). A failure here is the harness's, not
our model's."""

import unittest

import pytest
from transformers import MarianConfig, MarianModel, MarianMTModel

from .transformers_common import Seq2SeqModelTester, load_modeling_common

common = load_modeling_common()


@pytest.mark.filterwarnings("default")
class MarianCommonTest(common.ModelTesterMixin, common.GenerationTesterMixin, unittest.TestCase):
    all_model_classes = (MarianModel, MarianMTModel)
    is_encoder_decoder = True
    test_missing_keys = False

    def setUp(self):
        # Special tokens as transformers' Marian tests number them: <s> 0, <pad> 1, </s> 2, start 3.
        def make_config(**sizes):
            return MarianConfig(
                **sizes, pad_token_id=1, eos_token_id=2, bos_token_id=0, decoder_start_token_id=3
            )

        self.model_tester = Seq2SeqModelTester(
            self, make_config, pad_token_id=1, eos_token_id=2, first_plain_id=3
        )
