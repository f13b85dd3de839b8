"""The format's own sections (``severities:``, ``failure_types:``, ``actions:``,
``context:``, ``session:``) as the root model declares them: their models are in
vocabulary.py, and ``engine.format.section`` names these functions, so that only composing
the root model imports them. A module of its own, not vocabulary.py: the checks that
section.py names in its annotations import vocabulary.py, so vocabulary.py importing
section.py would close a circle."""

from __future__ import annotations

from engine.format.section import Declared, mapping, single
from engine.format.vocabulary import ActionSpec, ContextKey, FailureType, SessionKeys


def severities() -> Declared:
    return single(dict[str, int], default_factory=dict)


def failure_types() -> Declared:
    return mapping(str, FailureType)


def actions() -> Declared:
    return mapping(str, ActionSpec)


def context() -> Declared:
    return mapping(str, ContextKey)


def session() -> Declared:
    return single(SessionKeys)
