"""A loaded pack written down as plain data, and built again from it without YAML or pydantic.

What a ``Pack`` is built from is its validated model, the positions of its YAML nodes and
its files. Once a pack has loaded and checked clean, ``pack_image`` writes these down as
JSON data: the model's fields (``model_dump(mode="json")``) with the places where a model
stands, the source map, the pack's folder and files. ``thawed_pack`` builds the same
``Pack`` from it: the model as ``engine.core.frozen.Frozen`` records, compiled as a loaded
pack is (templates, contract texts and schemas are read from their files then), but for
its prompt templates, each compiled when it is first rendered: a command that starts from
an image evaluates or renders one output.

A pack is written down only where reading it back gives exactly the values validation gave:
every value plain JSON (strings as keys), every contract of one of the engine's own kinds,
no section registered from outside the engine (their code may read their models in other
ways than by their fields). Otherwise ``pack_image`` says None and the pack is loaded as
usual every time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core.errors import Position
from engine.core.frozen import Place, thaw
from engine.format.locate import display_path
from engine.format.sourcemap import SourceMap
from engine.pack.compiled import Pack
from engine.pack.sections import from_engine_alone

if TYPE_CHECKING:
    from engine.format.model import Rulepack


class NotPlain(Exception):
    """A value of the model that JSON would not give back as it is."""


def pack_image(pack: Pack) -> dict[str, Any] | None:
    """The plain data ``thawed_pack`` builds ``pack`` again from; None when the pack cannot
    be written down exactly (see the module's text)."""
    model: Any = pack.model
    # Deferred for start-up time: only writing an image (after a full load) needs them.
    from pydantic import BaseModel

    if not from_engine_alone(type(model)):  # composed with a kind or section from outside
        return None
    places: list[Place] = []

    def write(value: Any, place: Place) -> Any:
        if isinstance(value, BaseModel):
            places.append(place)
            fields = type(value).model_fields
            return {name: write(getattr(value, name), (*place, name)) for name in fields}
        if isinstance(value, dict):
            if not all(isinstance(key, str) for key in value):
                raise NotPlain(place)
            return {key: write(item, (*place, key)) for key, item in value.items()}
        if isinstance(value, list):
            return [write(item, (*place, index)) for index, item in enumerate(value)]
        if value is None or isinstance(value, (str, int, float)):  # bool is an int
            return value
        raise NotPlain(place)

    try:
        data = write(model, ())
    except NotPlain:
        return None
    return {
        "model": data,
        "models": [list(place) for place in places],
        "source": _source_data(pack.source),
        "root": os.path.abspath(pack.root),
        "files": [os.path.abspath(file) for file in pack.files],
    }


def thawed_pack(image: dict[str, Any]) -> Pack:
    """The ``Pack`` ``image`` (``pack_image``) was written from; any error in the data
    (a damaged image) raises (KeyError, TypeError, ValueError ...): the caller loads the
    pack afresh then."""
    model: Rulepack = thaw(image["model"], image["models"])
    return Pack(
        model,
        Path(image["root"]),
        _source_map(image["source"]),
        files=tuple(Path(file) for file in image["files"]),
        lazy=True,
    )


def _source_data(source: SourceMap) -> dict[str, Any]:
    files: dict[str, int] = {}

    def rows(positions: dict[Any, Position]) -> list[list[Any]]:
        # a position names its file as users read it (relative to the working folder of the
        # process that loaded the pack): the image keeps where it is
        return [
            [list(path), files.setdefault(os.path.abspath(at.file), len(files)), at.line, at.column]
            for path, at in positions.items()
        ]

    values, keys = rows(source.values), rows(source.keys)
    return {
        "files": list(files),
        "values": values,
        "keys": keys,
        "refused": [list(path) for path in source.refused],
    }


def _source_map(data: dict[str, Any]) -> SourceMap:
    files = [display_path(Path(file)) for file in data["files"]]  # as this process shows it

    def positions(rows: list[list[Any]]) -> dict[Any, Position]:
        return {
            tuple(path): Position(files[index], line, column) for path, index, line, column in rows
        }

    return SourceMap(
        positions(data["values"]),
        positions(data["keys"]),
        {tuple(path) for path in data["refused"]},
    )
