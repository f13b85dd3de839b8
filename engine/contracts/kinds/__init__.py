"""The engine's own contract kinds, a package each; private to engine.contracts.

Other layers reach a kind through the kind Protocol (engine.contracts.kind) and the
registry; import-linter keeps every module outside engine.contracts out of this package.
"""
