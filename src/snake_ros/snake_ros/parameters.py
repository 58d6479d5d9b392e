"""Node parameters stated once: a table per node, declared, checked and documented from it.

Each node module holds one :class:`ParameterTable` (name, type, default, range or
choices, description with unit, read-only flag per parameter), in the spirit of
generate_parameter_library's ``parameters.yaml``. From that one table:

- :meth:`ParameterTable.declare` declares every parameter on the node with a
  ``ParameterDescriptor`` (rclpy then refuses wrong types and out-of-range values,
  at start-up and at run time), checks the choices, and refuses parameter
  overrides that name no parameter of the node (a typo in a params file or a
  ``-p`` argument);
- :meth:`ParameterTable.check` validates a set of changes in the node's on-set
  callback;
- :meth:`ParameterTable.check_file_values` validates a params-file block, which
  the tests run over every shipped ``config/*.yaml``;
- :meth:`ParameterTable.help` and :meth:`ParameterTable.markdown` print the node's
  ``--help`` and the parameter tables of ``docs/parameters.md``.

Every start-up problem is raised as :class:`ParameterError` whose text is one line
naming the parameter; ``snake_ros.runtime.run_node`` turns it into exit code 2.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from snake_core.schema import SAFE_LOADER

# Parameters every rclpy node may receive without declaring them.
_BUILTIN_PREFIXES = ("use_sim_time", "qos_overrides.", "start_type_description_service")

_TYPE_NAMES = {
    bool: "bool", int: "integer", float: "double", str: "string",
}
_ARRAY_TYPES = {
    bool: Parameter.Type.BOOL_ARRAY, int: Parameter.Type.INTEGER_ARRAY,
    float: Parameter.Type.DOUBLE_ARRAY, str: Parameter.Type.STRING_ARRAY,
}


class ParameterError(ValueError):
    """A parameter value or override the node cannot start with (one line of text)."""


@dataclass(frozen=True)
class Param:
    """One node parameter.

    Attributes:
        name: parameter name.
        default: default value; its Python type is the parameter's type (``int``
            and ``float`` are distinct, as in ROS 2). For arrays, a list whose
            element type is ``item``.
        description: what it is, with its unit.
        lo: smallest allowed value (numbers), or None.
        hi: largest allowed value (numbers), or None.
        choices: the allowed strings, or empty.
        read_only: fixed after start-up.
        item: element type of an array parameter (``float``, ``int``, ``str``, ``bool``).
    """

    name: str
    default: Any
    description: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = False
    item: type | None = None

    @property
    def is_array(self) -> bool:
        """Whether the parameter is an array."""
        return isinstance(self.default, (list, tuple))

    @property
    def type_name(self) -> str:
        """ROS 2 type name, e.g. ``double`` or ``string[]``."""
        if self.is_array:
            return f"{_TYPE_NAMES[self._item()]}[]"
        return _TYPE_NAMES[type(self.default)]

    def _item(self) -> type:
        if self.item is not None:
            return self.item
        if self.default:
            return type(self.default[0])
        raise TypeError(f"{self.name}: an empty array default needs `item`")

    def descriptor(self) -> ParameterDescriptor:
        """The ``ParameterDescriptor`` rclpy enforces (type, range, read-only)."""
        text = self.description
        if self.choices:
            text += f" (one of: {', '.join(self.choices)})"
        desc = ParameterDescriptor(description=text, read_only=self.read_only)
        if self.lo is not None or self.hi is not None:
            if isinstance(self.default, bool) or self.is_array:
                raise TypeError(f"{self.name}: ranges apply to scalar numbers only")
            if isinstance(self.default, int):
                desc.integer_range = [IntegerRange(
                    from_value=int(self.lo if self.lo is not None else -(2 ** 63)),
                    to_value=int(self.hi if self.hi is not None else 2 ** 63 - 1), step=1)]
            else:
                desc.floating_point_range = [FloatingPointRange(
                    from_value=float(self.lo if self.lo is not None else -math.inf),
                    to_value=float(self.hi if self.hi is not None else math.inf), step=0.0)]
        return desc

    def declare_value(self) -> Any:
        """The default as rclpy wants it (a ``Parameter.Type`` for an empty array)."""
        if self.is_array and not self.default:
            return _ARRAY_TYPES[self._item()]
        return list(self.default) if self.is_array else self.default

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not acceptable for this parameter, or None.

        Used for values that did not pass through rclpy (params files read by the
        tests) and for the checks rclpy has no descriptor field for (choices,
        finiteness).
        """
        if self.is_array:
            if not isinstance(value, (list, tuple)):
                return f"expected {self.type_name}, got {value!r}"
            item = self._item()
            for v in value:
                if not _is_type(v, item):
                    return f"expected {self.type_name}, got element {v!r}"
            return None
        if not _is_type(value, type(self.default)):
            hint = f" (write {float(value)!r})" if self.type_name == "double" and _is_type(value, int) else ""
            given = _TYPE_NAMES.get(type(value), type(value).__name__)
            return f"expected {self.type_name}, got {given} {value!r}{hint}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be finite, got {value!r}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.lo is not None and value < self.lo:
                return f"must be >= {self.lo:g}, got {value!r}"
            if self.hi is not None and value > self.hi:
                return f"must be <= {self.hi:g}, got {value!r}"
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}; got {value!r}{did_you_mean(str(value), self.choices)}"
        return None


def _is_type(value: Any, typ: type) -> bool:
    if typ is bool:
        return isinstance(value, bool)
    if typ is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typ is float:
        return isinstance(value, float)
    return isinstance(value, typ)


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean `x`?)`` for the closest candidate, or an empty string."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


@dataclass(frozen=True)
class ParameterTable:
    """All parameters of one node, in declaration order."""

    node_name: str
    params: tuple[Param, ...]
    summary: str = ""
    _by_name: dict[str, Param] = field(init=False, repr=False, compare=False)

    def __init__(self, node_name: str, params: Sequence[Param], summary: str = "") -> None:
        object.__setattr__(self, "node_name", node_name)
        object.__setattr__(self, "params", tuple(params))
        object.__setattr__(self, "summary", summary)
        by_name = {p.name: p for p in self.params}
        if len(by_name) != len(self.params):
            raise TypeError(f"{node_name}: duplicate parameter names")
        object.__setattr__(self, "_by_name", by_name)
        for p in self.params:
            if p.problem(p.default) is not None:
                raise TypeError(f"{node_name}.{p.name}: default {p.default!r}: {p.problem(p.default)}")

    def __getitem__(self, name: str) -> Param:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def names(self) -> list[str]:
        """Parameter names in declaration order."""
        return [p.name for p in self.params]

    def defaults(self) -> dict[str, Any]:
        """Every parameter's default."""
        return {p.name: p.default for p in self.params}

    # ------------------------------------------------------------------ the node
    def declare(self, node: Node) -> dict[str, Any]:
        """Declare every parameter on ``node``; its start-up values by name.

        Raises:
            ParameterError: a wrong type, a value out of range or not among the
                choices, or an override that names no parameter of this node.
        """
        values: dict[str, Any] = {}
        for p in self.params:
            try:
                node.declare_parameter(p.name, p.declare_value(), p.descriptor())
            except InvalidParameterTypeException as err:
                given = node._parameter_overrides.get(p.name)  # the override rclpy refused
                problem = p.problem(given.value) if given is not None else None
                raise ParameterError(f"parameter {p.name}: {problem or f'expected {p.type_name}'}") from err
            except InvalidParameterValueException as err:
                given = node._parameter_overrides.get(p.name)
                raise ParameterError(
                    f"parameter {p.name}: {p.problem(given.value) if given is not None else err}") from err
            value = parameter_value(node, p.name)
            problem = p.problem(list(value) if p.is_array else value)
            if problem is not None:
                raise ParameterError(f"parameter {p.name}: {problem}")
            values[p.name] = list(value) if p.is_array else value
        unknown = [name for name in node._parameter_overrides  # overrides given to this node
                   if name not in self._by_name and not name.startswith(_BUILTIN_PREFIXES)]
        if unknown:
            name = sorted(unknown)[0]
            raise ParameterError(f"parameter {name}: not a parameter of {self.node_name}"
                                 f"{did_you_mean(name, self.names)}")
        return values

    def check(self, changes: Mapping[str, Any]) -> str | None:
        """Why a set of run-time changes is refused, or None (for on-set callbacks)."""
        for name, value in changes.items():
            p = self._by_name.get(name)
            if p is None:
                continue
            problem = p.problem(list(value) if p.is_array else value)
            if problem is not None:
                return f"{name}: {problem}"
        return None

    # ------------------------------------------------------------------ files and docs
    def check_file_values(self, values: Mapping[str, Any]) -> list[str]:
        """Problems of a params-file ``ros__parameters`` block (one line each)."""
        problems = []
        for name, value in values.items():
            p = self._by_name.get(name)
            if p is None:
                if not name.startswith(_BUILTIN_PREFIXES):
                    problems.append(f"{name}: not a parameter of {self.node_name}{did_you_mean(name, self.names)}")
                continue
            problem = p.problem(value)
            if problem is not None:
                problems.append(f"{name}: {problem}")
        return problems

    def help(self, executable: str) -> str:
        """``--help`` text: usage and every parameter with type, default and range."""
        lines = [f"usage: {executable} [--ros-args -p NAME:=VALUE ... --params-file FILE ...]", ""]
        if self.summary:
            lines += [self.summary, ""]
        lines.append(f"parameters of {self.node_name}:")
        width = max(len(p.name) for p in self.params)
        for p in self.params:
            lines.append(f"  {p.name:<{width}}  {p.type_name:<9} default {_show(p.default)}{_bounds(p)}"
                         f"{'  (read-only)' if p.read_only else ''}")
            lines.append(f"  {'':<{width}}  {p.descriptor().description}")
        return "\n".join(lines)

    def markdown(self) -> str:
        """A Markdown table of the parameters (``docs/parameters.md``)."""
        rows = [f"### `{self.node_name}`", "", "| parameter | type | default | range | description |",
                "|---|---|---|---|---|"]
        for p in self.params:
            rng = _bounds(p).strip(" ,") or ""
            if p.choices:
                rng = " \\| ".join(p.choices)
            rows.append(f"| `{p.name}` | {p.type_name} | `{_show(p.default)}` | {rng} | "
                        f"{p.description}{' (read-only)' if p.read_only else ''} |")
        return "\n".join(rows)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if value == "" else value
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _bounds(p: Param) -> str:
    if p.lo is None and p.hi is None:
        return ""
    lo = "-inf" if p.lo is None else f"{p.lo:g}"
    hi = "inf" if p.hi is None else f"{p.hi:g}"
    return f", range [{lo}, {hi}]"



STACK_NODE_NAMES = frozenset({
    "gait_node", "bridge_node", "twin_node", "planner_node", "path_follower",
    "singularity_monitor", "slippage_monitor", "robot_state_publisher", "bench_robot",
})
"""Names of the nodes the stack's launch files start (``snake_ros``'s nodes and robot_state_publisher).

A params file for the whole robot holds a block for each of them; a node takes its own
block and leaves the others to their nodes.
"""


def _block_node(key: str) -> str:
    """The node-name part of a params-file top-level key (``/**/gait_node`` -> ``gait_node``)."""
    return key.strip("/").rsplit("/", 1)[-1]


def block_applies(key: str, node_name: str) -> bool:
    """Whether a params-file top-level key addresses ``node_name`` (rcl's ``*`` and ``**`` included)."""
    return _block_node(key) in (node_name, "*", "**")


def misnamed_block(key: str, node_name: str, known: Iterable[str] = STACK_NODE_NAMES) -> str | None:
    """Why a block that does not address ``node_name`` looks like a misspelling of it, or None.

    A block for another node is normal (one params file for the whole robot). It is
    taken as a misspelled block of this node only when its name is no known node of
    the stack (``known``) and, of those names and ``node_name``, the closest to it is
    ``node_name`` (difflib similarity 0.6 or more, as :func:`did_you_mean`).
    """
    last = _block_node(key)
    names = set(known) | {node_name}
    if last in names or last in ("*", "**"):
        return None
    close = difflib.get_close_matches(last, sorted(names), n=1, cutoff=0.6)
    if close != [node_name]:
        return None
    return f"no node of that name{did_you_mean(last, [node_name])}"


def read_params_file(path: str | Path, table: ParameterTable | None, node_name: str | None = None) -> dict[str, Any]:
    """The values a params file gives one node, checked the way the node checks them.

    Blocks apply as rcl applies them (``node``, ``/**/node``, ``/ns/node``, ``/**``),
    later blocks over earlier ones.

    Args:
        path: The params file.
        table: The node's parameter table (its values are checked against it), or None.
        node_name: The node's name (default: the table's).

    Raises:
        ParameterError: One line naming the file and the field: the file is missing,
            unreadable, not YAML or not a params file; a block's name is a near miss of
            the node's name and of no other node of the stack (see :func:`misnamed_block`:
            a misspelled block would otherwise be ignored); a value the table refuses.
            Blocks for the stack's other nodes are left to them.
    """
    name = node_name or (table.node_name if table is not None else "")
    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    except OSError as err:
        raise ParameterError(f"{path}: cannot read params file: {err.strerror or err}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ParameterError(f"{path}: not valid YAML{where}: {getattr(err, 'problem', None) or err}") from err
    if not isinstance(data, dict):
        raise ParameterError(f"{path}: a params file maps node names to `ros__parameters` blocks")
    values: dict[str, Any] = {}
    for raw_key, block in data.items():
        key = str(raw_key)
        if not isinstance(block, dict) or "ros__parameters" not in block:
            raise ParameterError(f"{path}: {key}: expected a `ros__parameters:` block")
        if not block_applies(key, name):
            problem = misnamed_block(key, name)
            if problem is not None:
                raise ParameterError(f"{path}: {key}: {problem}")
            continue
        given = block["ros__parameters"]
        if not isinstance(given, dict):
            raise ParameterError(f"{path}: {key}.ros__parameters: expected a mapping of parameter names")
        if table is not None:
            problems = table.check_file_values(given)
            if problems:
                raise ParameterError(f"{path}: {key}.ros__parameters.{problems[0]}")
        values.update(given)
    return values


def parameter_value(node: Node, name: str) -> Any:
    """A declared parameter's value; an array declared by type and never given reads as ``[]``."""
    try:
        value = node.get_parameter(name).value
    except ParameterUninitializedException:  # an array declared by type, not given
        return []
    return [] if value is None else value
