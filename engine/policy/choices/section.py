"""The ``menus:`` section: the options a final decision offers the user (``rules choose``);
its model in ``model.py``, its checks in ``checks.py``, recording a choice in
``engine.session.choice_book``."""

from __future__ import annotations

from engine.format.section import BuiltinSection, Declared, mapping


def _declared() -> Declared:
    # Deferred for start-up time: the model and checks import pydantic, which compiling a
    # pack read back from its image never needs (engine.format.section).
    from engine.format import fields
    from engine.policy.choices import checks, model

    return mapping(fields.Name, model.Menu, checks.check_menus)


MENUS = BuiltinSection("menus", _declared)
