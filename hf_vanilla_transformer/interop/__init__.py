"""The model among other tools: the Hub (`hub`: assemble and upload a model's repository), Marian/OPUS-MT
(`marian`: import its checkpoints) and CTranslate2 (`ctranslate2_export`, and `ctranslate2_inference`, which
runs without torch). Nothing is imported here, so that each loads only what it needs."""
