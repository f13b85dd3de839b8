"""The JSON answer of every route: UTF-8 as the command line writes it, and still JSON when
a caller's text held a lone surrogate (JSON can carry one escaped, UTF-8 cannot)."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse


class Document(JSONResponse):
    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(
                content, ensure_ascii=False, allow_nan=False, separators=(",", ":")
            ).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: escaped as \udXXX
            return json.dumps(
                content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
            ).encode("ascii")
