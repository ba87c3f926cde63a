"""YAML files validated by pydantic models, with errors that name the key path and the line.

The inventory of the ssh backend uses it, and so can any other YAML the tool reads: a user who
mistypes one key gets ``inventory.yaml line 7, nodes.1.port: Input should be a valid integer``,
not a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import pydantic
import yaml

from kafka_chaos.errors import YamlFileError

M = TypeVar("M", bound=pydantic.BaseModel)


def _line_of(root: yaml.Node | None, loc: tuple) -> int | None:
    """1-based line of the deepest node of ``loc`` that exists in the composed YAML tree."""
    node, line = root, None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(part)), None)
            if node is None:  # a missing key: the mapping that lacks it is the place to look
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
                and part < len(node.value):
            node = node.value[part]
        else:
            node = None
    return node.start_mark.line + 1 if node is not None else line


def load(path: Path, model: type[M]) -> M:
    """Read ``path`` and validate it as ``model``.

    Raises ``YamlFileError`` naming ``path``, the line (1-based) and the dotted key path of the
    first invalid or unknown key (models should set ``extra="forbid"``).
    """
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise YamlFileError(f"{path}: cannot read: {exc}") from None
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise YamlFileError(f"{path}{where}: not valid YAML: "
                            f"{getattr(exc, 'problem', None) or exc}") from None
    try:
        return model.model_validate(data if data is not None else {})
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        line = _line_of(root, loc)
        where = f" line {line}" if line is not None else ""
        key = ".".join(str(p) for p in loc) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise YamlFileError(f"{path}{where}, {key}: {err['msg']}{more}") from None


def error_at(path: Path, loc: tuple, message: str) -> YamlFileError:
    """A ``YamlFileError`` for a problem found after validation (a check that needs more than
    one key), naming ``path``, the line of the key path ``loc`` and ``loc`` itself."""
    try:
        line = _line_of(yaml.compose(Path(path).read_text()), loc)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        line = None
    where = f" line {line}" if line is not None else ""
    return YamlFileError(f"{path}{where}, {'.'.join(map(str, loc))}: {message}")
