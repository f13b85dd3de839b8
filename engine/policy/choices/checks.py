"""The checks of the ``menus:`` section (section.py declares it): every menu a trigger
offers is declared."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.format.fields import Name
from engine.format.findings import FindingRule
from engine.format.section import Declared, mapping
from engine.policy.choices.model import Menu

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


UNKNOWN_MENU = FindingRule(
    "unknown-menu",
    "An after-failure menu that is not declared.",
    "Declare it under `menus:`.",
)


def check_menus(pack: Rulepack, checker: PackChecker) -> None:
    """Every `after_failure.menu` names a menu of `menus:`."""
    for block, trigger in pack.triggers.items():
        menu = trigger.after_failure.menu
        if menu is not None and menu not in pack.menus:
            checker.add(
                UNKNOWN_MENU,
                f"trigger {block!r} offers menu {menu!r}, which is not declared",
                ("triggers", block, "after_failure", "menu"),
                f"declare it under `menus:` (menus: {', '.join(pack.menus) or 'none'})",
            )


def declared() -> Declared:
    """The ``menus:`` section in the root model (section.py names it)."""
    return mapping(Name, Menu, check_menus)
