"""A pack loaded, checked and compiled once: the check pipeline, ``Pack``, the parse entry
point for many records, the compiled-pack cache and the pack's own test cases."""
