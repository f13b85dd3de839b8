"""The ``menus:`` section: the options a final decision offers the user (``rules choose``);
its model in ``model.py``, its checks in ``checks.py``, recording a choice in
``engine.session.choice_book``."""

from __future__ import annotations

from engine.format.section import BuiltinSection, Declared, mapping


def _declared() -> Declared:
    # Deferred for start-up time: the model and checks import pydantic, which compiling a
    # pack read back from its image never needs (engine.format.section).
    from engine.format.fields import Name
    from engine.policy.choices.checks import check_menus
    from engine.policy.choices.model import Menu

    return mapping(Name, Menu, check_menus)


MENUS = BuiltinSection("menus", _declared)
