"""transformers' own common model tests (`ModelTesterMixin` of the installed release, fetched by
tests/transformers_common.py) on our two model classes, as transformers runs them on the models it ships.
test_common_marian.py runs MarianMTModel on the same harness."""

import unittest

import pytest

from hf_vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
)

from .transformers_common import Seq2SeqModelTester, in_name_tables, load_modeling_common

common = load_modeling_common()


# The common tests check which warnings are raised (a deprecated cache name must warn): the suite's
# ignore filters for FutureWarning and DeprecationWarning are lifted here.
@pytest.mark.filterwarnings("default")
class VanillaTransformerCommonTest(common.ModelTesterMixin, common.GenerationTesterMixin, unittest.TestCase):
    all_model_classes = (VanillaTransformerModel, VanillaTransformerForConditionalGeneration)
    is_encoder_decoder = True

    @classmethod
    def setUpClass(cls):
        names = in_name_tables("vanilla_transformer", *(model.__name__ for model in cls.all_model_classes))
        cls.enterClassContext(names)

    def setUp(self):
        # Special tokens as the package's tokenizers number them: <pad> 0, <s> 1, </s> 2, <unk> 3. The loss
        # without label smoothing (§5.4's 0.1 is the default): test_encoder_decoder_loss_no_double_shift
        # checks the loss's alignment against plain cross-entropy (tests/test_modeling.py checks smoothing).
        def make_config(**sizes):
            return VanillaTransformerConfig(**sizes, label_smoothing=0.0)

        self.model_tester = Seq2SeqModelTester(
            self, make_config, pad_token_id=0, eos_token_id=2, first_plain_id=4
        )
