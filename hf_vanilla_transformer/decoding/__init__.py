"""Decoding a saved model: the generate() settings and batching that scoring and translating share
(`generation`), and the file translator (`translating`: text files in, translations out, a window of lines at
a time, resumable, shared by processes)."""
