"""The ``reviews:`` section: the model and checks in ``model.py``; the queue itself is kept
by ``engine.session.review`` in the ledger."""

from __future__ import annotations

from engine.format.section import BuiltinSection

REVIEWS = BuiltinSection("reviews", "engine.policy.reviews.model:declared")
