"""Checks shared by the loaders of user-written configuration files.

Every file a user writes (robot, calibration, world, slippage case studies, experiment
settings) is validated strictly at load: unknown keys are errors with the closest valid
name, values are checked for type, range and finiteness, and each error is one line::

    <file>: <field path>: <problem>

e.g. ``tsnake.yaml: joints[3].directon: unknown key in joint m2_dorsal; did you mean `direction`?``.

Why hand-written checks rather than a schema library (pydantic v2 with ``extra="forbid"``,
or a JSON-schema validator): the core depends on numpy/scipy/networkx/yaml only; the
robot file's rules are mostly cross-field (per-type joint defaults merged into each joint,
joint count from ``n_modules x joint_order``, continuous joints vs operating mode, unique
names and servo IDs, limits inside the ground) and would be custom validators in any
library; and the one-line format with a suggestion would need a translation layer over
the library's error list. The few helpers below (key check with :mod:`difflib`, number
check, a YAML loader that rejects duplicate keys and reports syntax errors on one line)
keep each loader's rules next to the data class they build.

Every user file is read through :func:`read_user_file`: at most :data:`MAX_FILE_BYTES`
are read (a bigger file is refused before anything is parsed, so a wrong path to a large
file fails at once instead of exhausting memory), and :func:`load_yaml` refuses a file
with no YAML content (empty, or only comments) with that reason rather than letting a
loader report a missing block.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

Fail = Callable[[str, str], Exception]
"""Builds the error of one field: ``fail(field_path, problem)``."""

_SUGGEST_CUTOFF = 0.6  # difflib similarity ratio below which no key is suggested

MAX_FILE_BYTES = 1 << 20
"""Largest user configuration file read, bytes (1 MiB; the shipped files are below 10 KiB)."""

SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader with libyaml's parser where PyYAML was built with it (a tenth of the pure
Python parser's time: 2.5 ms instead of 26 ms for a robot file); the same constructor and
resolver, so the same values."""


class _StrictLoader(SAFE_LOADER):
    """:data:`SAFE_LOADER` that refuses a key written twice in one mapping.

    PyYAML keeps the last of two equal keys silently; a repeated ``lower:`` in a joint
    would then hide the first value. Keys brought in by a merge (``<<: *anchor``) may
    be overridden, as YAML intends.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node)
            if key in seen:
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (line {mark.line + 1})", mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_user_file(path: Path, error: type[Exception], noun: str = "file") -> str:
    """Read a user-written text file of at most :data:`MAX_FILE_BYTES` bytes.

    At most one byte more than the bound is read, so a huge file (or an endless device)
    is refused at once, before any parsing.

    Args:
        path: The file.
        error: Exception class raised on failure (a ``ValueError`` subclass).
        noun: What the file holds, for the message (``robot description``).

    Returns:
        The text.

    Raises:
        error: The file is missing, unreadable, not UTF-8 or larger than the bound.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise error(f"{path}: cannot read {noun}: {err.strerror or err}") from err
    if len(data) > MAX_FILE_BYTES:
        raise error(f"{path}: {noun} larger than {MAX_FILE_BYTES // 1024} KiB: not read (is it the right file?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{path}: cannot read {noun}: not UTF-8 text ({err.reason} at byte {err.start})") from err


def load_yaml(path: Path, error: type[Exception], noun: str = "file") -> Any:
    """Read and parse a YAML file; any failure is one line naming the file.

    Args:
        path: The file (read with :func:`read_user_file`).
        error: Exception class raised on failure (a ``ValueError`` subclass).
        noun: What the file holds, for the message (``robot description``).

    Returns:
        The parsed document (never ``None``).

    Raises:
        error: The file is missing, unreadable, too large, empty (no YAML content) or
            not valid YAML (line and column named).
    """
    text = read_user_file(path, error, noun)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a safe loader: no arbitrary objects
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "<yaml>"
        problem = " ".join(str(p) for p in (err.context, err.problem) if p)
        raise error(f"{path}: {where}: YAML error: {problem}") from err
    except yaml.YAMLError as err:
        raise error(f"{path}: <yaml>: YAML error: {' '.join(str(err).split())}") from err
    if data is None:
        raise error(f"{path}: empty {noun}: the file has no YAML content (only blanks or comments)")
    return data


def suggest(word: Any, valid: Iterable[str], what: str = "keys") -> str:
    """``; did you mean `x`?`` for the closest valid name, else ``; valid <what>: a, b, c``."""
    options = sorted(valid)
    close = difflib.get_close_matches(str(word), options, n=1, cutoff=_SUGGEST_CUTOFF)
    if close:
        return f"; did you mean `{close[0]}`?"
    return f"; valid {what}: {', '.join(options)}" if options else ""


def check_keys(block: Mapping[str, Any], valid: Iterable[str], path: str, fail: Fail, entry: str = "") -> None:
    """Refuse keys of ``block`` that are not in ``valid``.

    Args:
        block: The mapping read from the file.
        valid: Allowed keys.
        path: Field path of ``block`` (``""`` at the top level).
        fail: Error builder.
        entry: Words naming the entry, e.g. ``" in joint m2_dorsal"``.

    Raises:
        Exception: From ``fail``: ``<path>.<key>: unknown key<entry>; did you mean ...``.
    """
    allowed = set(valid)
    for key in block:
        if key not in allowed:
            raise fail(join(path, key), f"unknown key{entry}{suggest(key, allowed)}")


def join(path: str, key: Any) -> str:
    """Field path of ``key`` inside ``path`` (``body`` + ``radius`` -> ``body.radius``)."""
    return f"{path}.{key}" if path else str(key)


def is_number(value: Any) -> bool:
    """True for a finite int or float (``bool`` and NaN/inf excluded)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def number(value: Any, path: str, fail: Fail, *, low: float | None = None, high: float | None = None,
           low_open: bool = False, integer: bool = False) -> float:
    """Check a finite number within bounds and return it.

    Args:
        value: Value read from the file.
        path: Its field path.
        fail: Error builder.
        low: Lower bound (inclusive unless ``low_open``), or ``None``.
        high: Upper bound (inclusive), or ``None``.
        low_open: Exclude ``low`` itself (``low=0, low_open=True``: positive).
        integer: Require an integer.

    Returns:
        The value as a float (``int(...)`` it for integers).

    Raises:
        Exception: From ``fail``, naming the bounds and the value.
    """
    kind = "an integer" if integer else "a finite number"
    ok = isinstance(value, int) and not isinstance(value, bool) if integer else is_number(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        bounds = []
        if low is not None:
            bounds.append(f"{'>' if low_open else '>='} {low:g}")
        if high is not None:
            bounds.append(f"<= {high:g}")
        raise fail(path, f"must be {kind}{' ' + ' and '.join(bounds) if bounds else ''}, got {value!r}")
    return float(value)


def mapping(value: Any, path: str, fail: Fail, *, required: bool = True) -> Mapping[str, Any]:
    """Check that ``value`` is a mapping (``None`` gives ``{}`` when not ``required``)."""
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping):
        raise fail(path or "<top>", f"expected a mapping, got {_type_name(value)}")
    return value


def require(block: Mapping[str, Any], keys: Iterable[str], path: str, fail: Fail) -> None:
    """Refuse a block missing any of ``keys``."""
    for key in keys:
        if key not in block:
            raise fail(join(path, key), "missing")


def _type_name(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
