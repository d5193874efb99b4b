"""The main job on its embedded default: series data -> tokenizer -> a few minutes of training -> evaluation ->
reload -> expansions next to the CAS's. See `hf_vanilla_transformer.quickstart`; `--help` lists options."""

from hf_vanilla_transformer.quickstart import main

if __name__ == "__main__":
    main()
