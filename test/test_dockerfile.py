"""docker/Dockerfile checked without a Docker engine: every path it names exists, every version it pins is the suite's.

The image is built nowhere here, so a moved file or a drifted pin would go unnoticed until
a robot computer builds it. These tests parse the Dockerfile and check it against the
repository and the plain-colcon install layout (``test/test_install.py`` builds that
install): the sources it copies, the installed files and executables its build step
checks, the launch file it starts, and the pins of ``requirements.txt`` /
``constraints.txt`` it installs (read from those files, so a new pin is covered as
it is added).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "Dockerfile"

# Packages whose distribution name is not ``python3-<PyPI name>``.
_DEBIAN_ALIASES = {"yaml": "pyyaml", "serial": "pyserial", "pil": "pillow"}


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        word, _, rest = text.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends in a continuation line"
    return out


def _runs() -> str:
    return "\n".join(args for word, args in _instructions() if word in ("RUN", "CMD"))


def _normalise(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if "==" in text:
            name, version = text.split("==", 1)
            pins[_normalise(name.strip())] = version.strip()
    return pins


def _copy_sources() -> list[tuple[list[str], str]]:
    copies = []
    for word, args in _instructions():
        if word in ("COPY", "ADD"):
            parts = [p for p in shlex.split(args) if not p.startswith("--")]
            copies.append((parts[:-1], parts[-1]))
    return copies


def _installed_source(package: str, rel: str) -> Path:
    """The repository file that a plain colcon build installs as ``share/<package>/<rel>``.

    The layout of ``src/*/setup.py``'s data files: ``config/<subdir>/...`` to snake_core,
    the node params files at the top of ``config/`` and ``launch/``, ``urdf/``, ``rviz/``
    to snake_ros.
    """
    parts = Path(rel).parts
    if package == "snake_core" and parts[0] == "config" and len(parts) > 2:
        return ROOT.joinpath(*parts)
    if package == "snake_ros" and parts[0] in ("config", "launch", "urdf", "rviz") and len(parts) == 2:
        return ROOT.joinpath(*parts)
    if package in ("snake_core", "snake_ros", "snake_hardware", "snake_tools") and parts == ("package.xml",):
        return ROOT / "src" / package / "package.xml"
    pytest.fail(f"docker/Dockerfile checks share/{package}/{rel}, which no setup.py installs")


def test_every_copied_source_exists() -> None:
    copies = _copy_sources()
    assert copies
    for sources, _ in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"docker/Dockerfile copies {source}, which does not exist"


def test_every_tree_a_setup_py_installs_from_is_copied() -> None:
    """The setup.py files read data files from beside src/ (``../../config`` ...): the image must hold them."""
    copied = {Path(s).parts[0] for sources, _ in _copy_sources() for s in sources}
    read = set()
    for setup in sorted((ROOT / "src").glob("*/setup.py")):
        text = setup.read_text()
        read |= set(re.findall(r"\.\./\.\./(\w+)", text))
        read |= set(re.findall(r'"\.\.",\s*"\.\.",\s*"(\w+)"', text))
    assert read, "no setup.py reads a tree beside src/ (the pattern is stale)"
    assert read <= copied, f"installed from but not copied: {sorted(read - copied)}"


def test_every_installed_file_the_build_checks_exists() -> None:
    checked = re.findall(r'\$\(ros2 pkg prefix (\w+)\)/share/(\w+)/([^"\s]+)', _runs())
    assert checked, "the image's build step checks no installed file"
    for package, share, rel in checked:
        assert package == share, f"share/{share} is not {package}'s"
        source = _installed_source(package, rel)
        assert source.is_file(), f"docker/Dockerfile checks share/{package}/{rel}: no {source.relative_to(ROOT)}"


def test_every_executable_and_launch_file_it_runs_exists() -> None:
    runs = _runs()
    executables = re.findall(r"ros2 run (\w+) (\w+)", runs)
    launches = re.findall(r"ros2 launch (\w+) ([\w.]+)", runs)
    assert executables and launches
    for package, exe in executables:
        setup = (ROOT / "src" / package / "setup.py").read_text()
        assert re.search(rf'"{re.escape(exe)}\s*=', setup), f"{package} has no executable {exe}"
    for package, launch in launches:
        assert package == "snake_ros" and (ROOT / "launch" / launch).is_file(), launch


def test_every_version_it_pins_is_the_suites() -> None:
    pins = {**_pins(ROOT / "constraints.txt"), **_pins(ROOT / "requirements.txt")}
    text = "\n".join(args for _, args in _instructions())
    for name, version in re.findall(r"([A-Za-z0-9][A-Za-z0-9_.-]*)==([^\s'\"]+)", text):
        assert pins.get(_normalise(name)) == version, f"docker/Dockerfile pins {name}=={version}, the suite " \
                                                     f"{pins.get(_normalise(name), 'does not pin it')}"


def test_the_image_installs_every_python_pin_from_the_suites_files() -> None:
    """pip installs requirements.txt under constraints.txt, leaving out only the ros-* wheels (the base image's)."""
    runs = _runs()
    copied = {Path(s).name: dest for sources, dest in _copy_sources() for s in sources}
    assert "requirements.txt" in copied and "constraints.txt" in copied
    pip = [line for line in re.split(r"&&|\n", runs) if "pip3 install" in line or "pip install" in line]
    assert len(pip) == 1, pip
    assert re.search(r"-c \S*constraints\.txt", pip[0]), pip[0]
    assert "--ignore-installed" in pip[0]  # else the distribution's older copies could stay
    grep = re.search(r"grep -v -E '([^']+)' \S*requirements\.txt > (\S+)", runs)
    assert grep is not None and re.search(rf"-r {re.escape(grep.group(2))}", pip[0]), runs
    left_out = [line for line in (ROOT / "requirements.txt").read_text().splitlines()
                if re.search(grep.group(1), line) and "==" in line.split("#", 1)[0]]
    assert left_out and all(_normalise(line).startswith("ros-") for line in left_out), left_out


def test_no_distribution_package_shadows_a_pinned_one() -> None:
    """A ``python3-numpy`` (or the ROS distribution's copy of a pinned library) runs the distribution's version."""
    pins = _pins(ROOT / "requirements.txt")
    apt = [args for word, args in _instructions() if word == "RUN" and "apt-get install" in args]
    assert apt
    packages = [w for args in apt for w in args.split() if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", w)]
    for package in packages:
        name = re.sub(r"^(python3-|ros-[a-z]+-)", "", package)
        name = _normalise(_DEBIAN_ALIASES.get(name, name))
        assert name not in pins, f"docker/Dockerfile installs {package} from the distribution; " \
                                 f"the suite pins {name}=={pins[name]}"
