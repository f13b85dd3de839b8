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


def item_label(key: str) -> str:
    """An item's key as people name it: the name a caller gave (``job-7``), else its parts
    (``nonce 4F2C9A, question=Q1``; a run of its own shows its id's first 8 characters,
    ``run 10569d2e``). A key that is not such JSON is shown as it is."""
    try:
        parts = json.loads(key)
    except ValueError:
        return key
    if not isinstance(parts, dict):
        return key
    if set(parts) == {"item"} and isinstance(parts["item"], str):
        return parts["item"]
    shown: list[str] = []
    for name, value in parts.items():
        if value is None or value == {}:
            continue
        if name == "params" and isinstance(value, dict):
            shown += [f"{k}={v}" for k, v in value.items()]
        elif name == "run" and isinstance(value, str):
            shown.append(f"run {value[:8]}")
        else:
            shown.append(f"{name} {value}")
    return ", ".join(shown) or "(no parts)"
