"""What identifies an item of a session, and the hashes recorded for outputs and prompts."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def sha256(data: str | bytes) -> str:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def item_key(parts: Mapping[str, Any], *, name: str | None = None, run: str | None = None) -> str:
    """What makes repeated calls the same item: the values of the parts the pack's
    ``session.item`` names (by default the nonce and the params); an item a caller names
    (``name``: `--item`, ``item=``) is that name alone, whatever the parts; a ``run`` id
    (`rules run` without a nonce or a name) joins the parts, so the run is an item of its
    own."""
    if name is not None:
        return json.dumps({"item": name}, ensure_ascii=False)
    values = dict(parts) if run is None else {**parts, "run": run}
    return json.dumps(values, sort_keys=True, ensure_ascii=False, default=str)
