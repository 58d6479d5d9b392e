"""The documentation stays true to the tree.

Every repository path written in README.md, CONTRIBUTING.md and docs/*.md exists (globs and
``<placeholder>`` parts must match at least one file), every relative Markdown link reaches a
file and, with a ``#fragment``, one of its headings; every dotted name ``snake_core.x.y[.Name]``
(likewise ``snake_hardware``, ``snake_ros``, ``snake_tools``) imports as a module or resolves as
an attribute, and class names and calls written in code appear in the code; every quoted
``snake <sub> ...`` command is a command of the CLI's parser and its ``--flags`` are options of
that command; every ``ros2 run|launch snake_ros ...`` names an executable, or a launch file and
arguments it declares. No file of the tree refers to issue numbers or sessions of its own
development. A failure lists ``<doc>:<line>: <name>: <reason>`` for every offender, so one run
shows all that needs fixing.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import os
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("snake_core", "snake_hardware", "snake_ros", "snake_tools")
DOCS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])

# Top-level directories of the repository a path may start with; a package name
# (``snake_core/gait/``) stands for ``src/<package>/<package>/`` or ``src/<package>/``.
_TOP_DIRS = ("src", "config", "launch", "scripts", "docs", "test", "urdf", "rviz", "docker")
_PATH = re.compile(
    r"(?<![\w./:~$@-])"
    rf"((?:{'|'.join(_TOP_DIRS + PACKAGES)})/(?:\{{[^}}\s]*\}}|[\w.*<>/-])*)"
)
_DOTTED = re.compile(rf"(?<![\w./-])((?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
# A source file named in inline code without a repository prefix (``follower.py``,
# ``sim/mjcf.py``): it must be the end of some file's path in the tree.
_SOURCE_FILE = re.compile(r"(?<![\w./:~$@-])([\w*<>{}-][\w./*<>{},-]*\.(?:py|sh|md))(?![\w/])")
_PRUNED_DIRS = {".git", ".venv", "build", "install", "log", "out", "__pycache__", ".mypy_cache", ".ruff_cache"}
_INLINE_CODE = re.compile(r"`([^`]+)`")
# Names of the code written bare in inline code: CamelCase classes (two humps or more,
# ``SimTwin``; ``pkg/Type`` message types excluded) and calls ``name(...)``. They must
# appear in the code of the tree (src/, launch/, test/).
_CLASS_NAME = re.compile(r"(?<![\w./])([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?![\w/])")
_CALL = re.compile(r"(?<![\w.])([a-z_][a-z0-9_]*)\(")
_NOT_CODE_SPANS = ("snake ", "ros2 ", "$ ")
_ROS2_COMMAND = re.compile(r"^(?:\$\s+)?ros2\s+(run|launch)\s+(\S+)\s+(\S+)(.*)$")
_OWN_ROS_PACKAGE = "snake_ros"
_SNAKE_COMMAND = re.compile(r"^(?:\$\s+)?snake\s+(.*)$")
_ALTERNATIVE_SEPARATORS = {"/", "|"}
_TRAILING_PUNCTUATION = ".,;:)"

# What no file of the tree may say: references a reader of the tree cannot follow.
_DEVELOPMENT_REFERENCES = re.compile(r"\bissues?\s*#?\s*\d+|\bnext\s+session\b|\bclosing\s+note\b", re.IGNORECASE)
_SCANNED = ("src", "docs", "launch", "config", "scripts")
_SCANNED_FILES = ("README.md", "CONTRIBUTING.md")
_TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".cfg", ".toml", ".txt", ".xml", ".rviz", ".ini", ""}


@dataclass(frozen=True)
class Offence:
    """One statement of a document the tree contradicts."""

    doc: Path
    line: int
    name: str
    reason: str

    def __str__(self) -> str:
        doc = self.doc.relative_to(ROOT) if self.doc.is_relative_to(ROOT) else self.doc
        return f"{doc}:{self.line}: {self.name}: {self.reason}"


def _lines(doc: Path) -> Iterator[tuple[int, str, list[str]]]:
    """Yield (line number, text, code pieces) of a Markdown file.

    The code pieces of a line are the inline code spans that start on it (a span may
    run on over the next lines of its paragraph, as Markdown allows), or the whole line
    inside a fenced code block.
    """
    lines = doc.read_text(encoding="utf-8").splitlines()
    spans: dict[int, list[str]] = {}
    fenced = False
    paragraph: list[int] = []

    def close_paragraph() -> None:
        text = "\n".join(lines[i] for i in paragraph)
        starts = [0]
        for i in paragraph[:-1]:
            starts.append(starts[-1] + len(lines[i]) + 1)
        for match in _INLINE_CODE.finditer(text):
            line = paragraph[sum(1 for start in starts if start <= match.start()) - 1]
            spans.setdefault(line, []).append(" ".join(match.group(1).split()))
        paragraph.clear()

    for index, text in enumerate(lines):
        if text.lstrip().startswith("```"):
            close_paragraph()
            fenced = not fenced
        elif fenced:
            spans[index] = [text]
        elif text.strip():
            paragraph.append(index)
        else:
            close_paragraph()
    close_paragraph()
    for index, text in enumerate(lines):
        if not text.lstrip().startswith("```"):
            yield index + 1, text, spans.get(index, [])


def _strip_punctuation(text: str) -> str:
    return text.rstrip(_TRAILING_PUNCTUATION)


def _expand_braces(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    return [
        expanded
        for alternative in match.group(1).split(",")
        for expanded in _expand_braces(pattern[: match.start()] + alternative + pattern[match.end():])
    ]


def _as_glob(path: str) -> str:
    return re.sub(r"<[^<>]*>", "*", path)


def _candidates(path: str) -> list[str]:
    head, _, rest = path.partition("/")
    if head in PACKAGES:
        return [f"src/{head}/{head}/{rest}", f"src/{head}/{rest}"]
    return [path]


def _exists(candidate: str) -> bool:
    if any(ch in candidate for ch in "*?["):
        return next(ROOT.glob(candidate), None) is not None
    return (ROOT / candidate).exists()


def _path_exists(pattern: str) -> bool:
    """Whether every brace alternative of ``pattern`` matches a file or directory."""
    return all(
        any(_exists(candidate) for candidate in _candidates(_as_glob(expanded).rstrip("/")))
        for expanded in _expand_braces(pattern)
    )


def path_offences(doc: Path) -> list[Offence]:
    """Repository paths written in ``doc`` that match no file or directory of the tree."""
    offences = []
    for number, text, _ in _lines(doc):
        for raw in _PATH.findall(text):
            path = _strip_punctuation(raw)
            if not _path_exists(path):
                offences.append(Offence(doc, number, path, "no such file or directory in the repository"))
    return offences


@cache
def _repository_files() -> tuple[str, ...]:
    files = []
    for directory, subdirs, names in os.walk(ROOT):
        subdirs[:] = [d for d in subdirs if d not in _PRUNED_DIRS and not d.endswith(".egg-info")]
        relative = Path(directory).relative_to(ROOT)
        files.extend((relative / name).as_posix() for name in names)
    return tuple(files)


def _source_file_exists(name: str) -> bool:
    """Whether every brace alternative of ``name`` is the end of a file's path in the tree."""
    return all(
        any(fnmatch.fnmatchcase(f, pattern) or fnmatch.fnmatchcase(f, f"*/{pattern}") for f in _repository_files())
        for pattern in map(_as_glob, _expand_braces(name))
    )


def source_file_offences(doc: Path) -> list[Offence]:
    """Source files (``.py``, ``.sh``, ``.md``) named in ``doc``'s code that no file of the tree ends with."""
    offences = []
    for number, _, pieces in _lines(doc):
        for span in pieces:
            if span.lstrip().startswith(("ros2 ", "$ ros2 ")):
                continue  # checked by ros2_offences; other packages' files are not in the tree
            for name in _SOURCE_FILE.findall(span):
                if name.split("/", 1)[0] in _TOP_DIRS + PACKAGES:
                    continue  # a repository path: checked by path_offences
                if not _source_file_exists(name):
                    offences.append(Offence(doc, number, name, "no file of the repository has this name"))
    return offences


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: letters, digits, ``-`` and ``_`` kept, spaces to ``-``."""
    kept = "".join(ch for ch in heading.strip().lower() if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return kept.replace(" ", "-")


@cache
def _anchors(doc: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors = set()
    fenced = False
    for text in doc.read_text(encoding="utf-8").splitlines():
        if text.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or not text.startswith("#"):
            continue
        slug = _slug(text.lstrip("#"))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(anchors)


def link_offences(doc: Path) -> list[Offence]:
    """Relative Markdown links of ``doc`` to a missing file or heading."""
    offences = []
    for number, text, _ in _lines(doc):
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, fragment = target.partition("#")
            linked = (doc.parent / file_part).resolve() if file_part else doc
            if not linked.exists():
                offences.append(Offence(doc, number, target, "link to a missing file"))
            elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
                offences.append(Offence(doc, number, target, f"no heading with anchor #{fragment} in {linked.name}"))
    return offences


def resolve_dotted(name: str) -> str | None:
    """Import the longest module prefix of ``name`` and resolve the rest as attributes.

    Returns:
        None when the name resolves, else the reason it does not.
    """
    parts = name.split(".")
    module: ModuleType | None = None
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name is not None and module_name.startswith(err.name):
                continue
            return f"importing {module_name} fails: {err}"
        except Exception as err:  # any import failure is the finding
            return f"importing {module_name} fails: {type(err).__name__}: {err}"
        break
    if module is None:
        return f"no module {parts[0]}"
    obj: object = module
    for j, attribute in enumerate(parts[i:], start=i):
        if not hasattr(obj, attribute):
            return f"{'.'.join(parts[:j])} has no attribute or submodule {attribute!r}"
        obj = getattr(obj, attribute)
    return None


def dotted_offences(doc: Path) -> list[Offence]:
    """Dotted Python names written in ``doc`` that neither import nor resolve."""
    offences = []
    for number, text, _ in _lines(doc):
        for name in _DOTTED.findall(text):
            reason = resolve_dotted(name)
            if reason is not None:
                offences.append(Offence(doc, number, name, reason))
    return offences


@cache
def _code_words() -> frozenset[str]:
    words: set[str] = set()
    sources = [*(ROOT / "src").rglob("*.py"), *(ROOT / "launch").glob("*.py"), *(ROOT / "test").glob("*.py")]
    for path in sources:
        if path.resolve() != Path(__file__).resolve() and not _PRUNED_DIRS.intersection(path.relative_to(ROOT).parts):
            words.update(re.findall(r"[A-Za-z_]\w*", path.read_text(encoding="utf-8")))
    return frozenset(words)


def identifier_offences(doc: Path) -> list[Offence]:
    """Class names and called functions in ``doc``'s inline code that no code of the tree mentions."""
    offences = []
    for number, _, pieces in _lines(doc):
        for span in pieces:
            if span.startswith(_NOT_CODE_SPANS):
                continue
            for name in _CLASS_NAME.findall(span) + _CALL.findall(span):
                if name not in _code_words():
                    offences.append(Offence(doc, number, name, "no code in src/, launch/ or test/ has this name"))
    return offences


@cache
def _cli_parser() -> argparse.ArgumentParser:
    from snake_tools.cli import build_parser

    return build_parser()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser] | None:
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return None


def check_snake_command(command: str) -> str | None:
    """Check a quoted ``snake ...`` command line against the CLI's parser.

    ``a / b / c`` (or ``a | b``) in a subcommand position lists alternatives, each of
    which must exist; ``[--flag]`` is an optional flag; ``<name>`` a placeholder.

    Args:
        command: what follows ``snake`` on the quoted line.

    Returns:
        None when the command and its ``--flags`` exist, else the reason.
    """
    tokens = [_strip_punctuation(t.strip("[]")) for t in command.split("#", 1)[0].split()]
    tokens = [t for t in tokens if t]
    parser = _cli_parser()
    path = ["snake"]
    i = 0
    while i < len(tokens):
        choices = _subcommands(parser)
        token = tokens[i]
        if choices is None or token.startswith(("-", "<")):
            break
        alternatives = [token]
        j = i + 1
        while j + 1 < len(tokens) and tokens[j] in _ALTERNATIVE_SEPARATORS:
            alternatives.append(tokens[j + 1])
            j += 2
        missing = [a for a in alternatives if a not in choices]
        if missing:
            names = ", ".join(map(repr, missing))
            return f"{' '.join(path)} has no subcommand {names} (has: {', '.join(sorted(choices))})"
        if len(alternatives) > 1:
            return None
        parser = choices[token]
        path.append(token)
        i = j
    options = set(parser._option_string_actions)  # the parser's option table
    unknown = sorted({t.split("=", 1)[0] for t in tokens[i:] if t.startswith("--") and len(t) > 2} - options)
    if unknown:
        return f"{' '.join(path)} has no option {', '.join(unknown)}"
    return None


def _quoted_offences(doc: Path, pattern: re.Pattern[str], check: Callable[[re.Match[str]], str | None],
                     name: Callable[[re.Match[str], str], str]) -> list[Offence]:
    """Each code piece of ``doc`` that ``pattern`` matches and ``check`` rejects (``name`` says what it quotes)."""
    offences = []
    for number, _, pieces in _lines(doc):
        for piece in pieces:
            match = pattern.match(piece.strip())
            if match is None:
                continue
            reason = check(match)
            if reason is not None:
                offences.append(Offence(doc, number, name(match, piece), reason))
    return offences


def command_offences(doc: Path) -> list[Offence]:
    """``snake`` commands quoted in ``doc`` (inline code or code blocks) the CLI does not have."""
    return _quoted_offences(doc, _SNAKE_COMMAND, lambda m: check_snake_command(m.group(1)),
                            lambda m, _piece: f"snake {m.group(1).strip()}")


@cache
def _executables() -> frozenset[str]:
    setup = (ROOT / "src" / _OWN_ROS_PACKAGE / "setup.py").read_text(encoding="utf-8")
    return frozenset(re.findall(r"[\"'](\w+) = [\w.]+:main[\"']", setup))


@cache
def _launch_arguments(launch_file: Path) -> frozenset[str]:
    return frozenset(re.findall(r"DeclareLaunchArgument\(\s*[\"'](\w+)[\"']", launch_file.read_text(encoding="utf-8")))


def check_ros2_command(verb: str, package: str, target: str, rest: str) -> str | None:
    """Check ``ros2 run|launch snake_ros ...`` against the package's executables and launch files.

    Returns:
        None when the executable, or the launch file and every ``name:=`` argument, exist.
    """
    if package != _OWN_ROS_PACKAGE or target.startswith(("<", "...")):
        return None
    if verb == "run":
        if target not in _executables():
            return f"{package} has no executable {target!r} (has: {', '.join(sorted(_executables()))})"
        return None
    launch_file = ROOT / "launch" / target
    if not launch_file.is_file():
        return f"no launch file launch/{target}"
    unknown = sorted({m for m in re.findall(r"(?<!\S)(\w+):=", rest.split("#", 1)[0])} - _launch_arguments(launch_file))
    if unknown:
        return f"launch/{target} declares no argument {', '.join(unknown)}"
    return None


def ros2_offences(doc: Path) -> list[Offence]:
    """``ros2 run`` / ``ros2 launch`` lines of ``doc`` naming an executable, launch file or argument we lack."""
    return _quoted_offences(doc, _ROS2_COMMAND, lambda m: check_ros2_command(*m.groups()),
                            lambda _m, piece: piece.strip().split("#", 1)[0].strip())


def _report(offences: list[Offence]) -> str:
    return f"{len(offences)} statement(s) the tree contradicts:\n" + "\n".join(map(str, offences))


def _doc_id(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_paths_in_docs_exist(doc: Path) -> None:
    offences = path_offences(doc) + source_file_offences(doc) + link_offences(doc)
    assert not offences, _report(offences)


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_python_names_in_docs_exist(doc: Path) -> None:
    offences = dotted_offences(doc) + identifier_offences(doc)
    assert not offences, _report(offences)


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_commands_in_docs_exist(doc: Path) -> None:
    offences = command_offences(doc) + ros2_offences(doc)
    assert not offences, _report(offences)


def _scanned_files() -> Iterator[Path]:
    for name in _SCANNED_FILES:
        yield ROOT / name
    for top in _SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            relative = path.relative_to(ROOT).parts
            if (
                path.is_file()
                and path.suffix in _TEXT_SUFFIXES
                and not _PRUNED_DIRS.intersection(relative)
                and not any(part.endswith(".egg-info") for part in relative)
            ):
                yield path


def test_no_file_refers_to_issues_or_sessions_of_its_development() -> None:
    offences = [
        Offence(path, number, match.group(0), "refers to the tree's development, which a reader cannot see")
        for path in _scanned_files()
        for number, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1)
        for match in _DEVELOPMENT_REFERENCES.finditer(text)
    ]
    assert not offences, _report(offences)


# The checks above pass vacuously if the extraction finds nothing: these pin that it
# finds what a document writes, and that the resolvers refuse what does not exist.


def test_extraction_finds_paths_names_and_commands(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "See `src/snake_core/snake_core/robot.py`, snake_core/no_such.py and `config/robots/<robot>.yaml`.\n"
        "The loader `snake_core.robot.load_robot` and `snake_core.robot.no_such_name`.\n"
        "[a link](no_such.md) and [this](#a-heading-here)\n"
        "## A heading, here\n"
        "```bash\n"
        "snake gait --omega-h 1 --no-such-flag   # comment\n"
        "snake no-such-command\n"
        "```\n"
        "`snake bag record / info / nonsense`, `snake reduction forward / inverse`\n"
        "`sim/mjcf.py`, `follower.py`, `no_such_module.py`, `out/report.html`\n"
        "`SimTwin`, `NoSuchClass`, `std_msgs/FloatThing`, `load_robot(name)`, `no_such_function(x)`, `a.b_c(d)`\n"
        "`ros2 run snake_ros gait_node`, `ros2 run snake_ros no_node`, `ros2 run other_pkg x`\n"
        "`ros2 launch snake_ros sim.launch.py world:=flat`, `ros2 launch snake_ros sim.launch.py wrld:=flat`\n",
        encoding="utf-8",
    )
    doc = doc.resolve()
    assert [(o.line, o.name) for o in path_offences(doc)] == [(1, "snake_core/no_such.py")]
    assert [(o.line, o.name) for o in link_offences(doc)] == [(3, "no_such.md")]
    assert [(o.line, o.name) for o in source_file_offences(doc)] == [(10, "no_such_module.py")]
    assert [(o.line, o.name) for o in dotted_offences(doc)] == [(2, "snake_core.robot.no_such_name")]
    assert [(o.line, o.name) for o in identifier_offences(doc)] == [(11, "NoSuchClass"), (11, "no_such_function")]
    commands = command_offences(doc)
    assert [o.line for o in commands] == [6, 7, 9]
    assert "--no-such-flag" in commands[0].reason and "--omega-h" not in commands[0].reason
    assert "'no-such-command'" in commands[1].reason
    assert "'nonsense'" in commands[2].reason
    assert [(o.line, o.reason) for o in ros2_offences(doc)] == [
        (12, f"snake_ros has no executable 'no_node' (has: {', '.join(sorted(_executables()))})"),
        (13, "launch/sim.launch.py declares no argument wrld"),
    ]


def test_resolvers_accept_what_exists_and_name_what_does_not() -> None:
    assert resolve_dotted("snake_core.robot.load_robot") is None
    assert resolve_dotted("snake_core.gait") is None
    assert "no attribute or submodule 'nope'" in (resolve_dotted("snake_core.robot.nope") or "")
    assert check_snake_command("experiment follow --robot tsnake --trials 20 [--workers N] --json") is None
    assert check_snake_command("bench gait / bridge / sim") is None
    assert "no subcommand 'warp'" in (check_snake_command("bench warp") or "")
    assert _path_exists("src/*/test") and _path_exists("config/{robots,worlds}/")
    assert not _path_exists("config/{robots,nowhere}/")
    assert _slug("Twin node (`snake_ros/twin_node.py`)") == "twin-node-snake_rostwin_nodepy"
    assert _slug("On the robot: `follow.launch.py`") == "on-the-robot-followlaunchpy"


def test_development_references_pattern() -> None:
    for text in ("see issue 4", "Issues 4/5", "issue #12", "Next session: a backend", "the closing note of"):
        assert _DEVELOPMENT_REFERENCES.search(text), text
    for text in ("a recorded session", "an issue with the cable", "the next reconnect"):
        assert not _DEVELOPMENT_REFERENCES.search(text), text
