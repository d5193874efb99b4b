"""Decoding a saved model: the decoding options every decoding command shares (`settings`, torch-free), the
generate() settings and batching that scoring and translating share (`generation`; `output_limit`, the paper's
output limit as generate()'s logits processor), and the file translator, a module per job: its options
(`arguments`), who decodes (`backends`: generate() or CTranslate2), input lines and windows (`lines`), a
window's work shared by processes (`windows`), what an output translates, so that a rerun continues it
(`record`), and the command (`translating`). Imported, none but `output_limit` loads torch: each function that
calls generate() imports it, so that `--help` and the CTranslate2 backend run without it."""
