"""The ``menus:`` section: the options a final decision offers the user (``rules choose``);
its model in ``model.py``, its checks in ``checks.py``, recording a choice in
``engine.session.choice_book``."""

from __future__ import annotations

from engine.format.section import BuiltinSection

MENUS = BuiltinSection("menus", "engine.policy.choices.checks:declared")
