"""The model among other tools: the Hub (`hub`: assemble and upload a model's repository), CTranslate2
(`ctranslate2_export`, and `ctranslate2_inference`, which runs without torch), and saved folders of earlier
versions (`updates`: bring their code and config files up to date). Importing Marian/OPUS-MT checkpoints is
the translation task's (`tasks.translation.marian`). Each submodule loads only what it needs:
`CTranslate2Seq2Seq` is importable from here, but `ctranslate2` is imported only when it is asked for."""

__all__ = ["CTranslate2Seq2Seq"]


def __getattr__(name: str):
    if name == "CTranslate2Seq2Seq":
        from .ctranslate2_inference import CTranslate2Seq2Seq

        return CTranslate2Seq2Seq
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
