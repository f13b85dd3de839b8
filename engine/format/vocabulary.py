"""The actions every pack can use without declaring them."""

from __future__ import annotations

from engine.format.model import ActionSpec

STANDARD_ACTIONS: dict[str, ActionSpec] = {
    "PROCEED": ActionSpec(final=True, exit_code=0, description="the output is accepted"),
    "REPAIR": ActionSpec(final=False, exit_code=3, description="send a format-repair prompt"),
    "RETRY": ActionSpec(final=False, exit_code=3, description="send a retry prompt"),
    "CYCLE_FAIL": ActionSpec(final=True, exit_code=1, description="fail the whole cycle"),
    "NEEDS_HUMAN": ActionSpec(final=True, exit_code=1, description="park it for a person"),
    "DEGRADE": ActionSpec(
        final=True, exit_code=0, description="proceed with the default value and a warning"
    ),
    "ESCALATE": ActionSpec(final=True, exit_code=1, description="hand over to a higher level"),
    "STOP": ActionSpec(final=True, exit_code=1, description="stop the pipeline"),
    "SKIP": ActionSpec(final=True, exit_code=1, description="skip this output"),
    "REVISE": ActionSpec(final=False, exit_code=3, description="ask for a revision"),
}
