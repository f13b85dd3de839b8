"""Interpreters of grammars declared in packs."""
