"""The actions every pack can use without declaring them.

They are plain records (``engine.core.frozen.Frozen``) with the fields of ``ActionSpec``:
deciding reads them without the model library, and everything else reads them as it reads
the actions a pack declares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core.frozen import Frozen

if TYPE_CHECKING:
    from engine.format.vocabulary import ActionSpec

_TABLE = (  # name, final, exit code, description
    ("PROCEED", True, 0, "the output is accepted"),
    ("REPAIR", False, 3, "send a format-repair prompt"),
    ("RETRY", False, 3, "send a retry prompt"),
    ("CYCLE_FAIL", True, 1, "fail the whole cycle"),
    ("NEEDS_HUMAN", True, 1, "park it for a person"),
    ("DEGRADE", True, 0, "proceed with the default value and a warning"),
    ("ESCALATE", True, 1, "hand over to a higher level"),
    ("STOP", True, 1, "stop the pipeline"),
    ("SKIP", True, 1, "skip this output"),
    ("REVISE", False, 3, "ask for a revision"),
)

STANDARD_ACTIONS: dict[str, ActionSpec] = {
    name: Frozen({"final": final, "exit_code": code, "description": text})  # type: ignore[misc]
    for name, final, code, text in _TABLE
}
