"""Decoding a saved model: the decoding options every decoding command shares (`settings`, torch-free), the
generate() settings and batching that scoring and translating share (`generation`), and the file translator,
a module per job: its options (`arguments`), who decodes (`backends`: generate() or CTranslate2), input lines
and windows (`lines`), a window's work shared by processes (`windows`), what an output translates, so that a
rerun continues it (`record`), and the command (`translating`)."""
