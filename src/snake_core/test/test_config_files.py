"""Config-file lookup (snake_core.config_files): the order of the places, names vs paths, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from snake_core import config_files
from snake_core.config_files import ConfigLookupError, looks_like_path, resolve
from snake_core.errors import RobotConfigError, WorldConfigError
from snake_core.robot import calibration_path, load_robot, resolve_robot_path
from snake_core.slippage.model import SlippageError
from snake_core.slippage.studies import default_config_path, load_case_study

ROOT = Path(__file__).resolve().parents[3]


def _config_tree(base: Path, robots: tuple[str, ...] = ("tsnake",)) -> Path:
    """A configuration directory with the given robot files (contents: their names)."""
    for sub in config_files.SUBDIRS.values():
        (base / sub).mkdir(parents=True, exist_ok=True)
    for name in robots:
        (base / "robots" / f"{name}.yaml").write_text(f"# {base} {name}\n")
    return base


def _fake_module(prefix: Path) -> Path:
    """Where config_files.py sits in a colcon install prefix."""
    module = prefix / "lib" / "python3.11" / "site-packages" / "snake_core" / "config_files.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    return module


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config_files.CONFIG_DIR_ENV, raising=False)


def test_the_source_checkout_uses_its_config_directory():
    assert config_files.config_dir() == ROOT / "config"
    assert resolve("robot", "tsnake") == ROOT / "config" / "robots" / "tsnake.yaml"
    assert resolve("world", "flat") == ROOT / "config" / "worlds" / "flat.yaml"
    assert resolve("experiment", "slippage_case_studies") == (
        ROOT / "config" / "experiments" / "slippage_case_studies.yaml")
    assert calibration_path("tsnake") == ROOT / "config" / "calibration" / "tsnake" / "twin.yaml"
    assert config_files.available("robot") == sorted(p.stem for p in (ROOT / "config" / "robots").glob("*.yaml"))


def test_the_environment_variable_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    other = _config_tree(tmp_path / "elsewhere", robots=("only_here",))
    monkeypatch.setenv(config_files.CONFIG_DIR_ENV, str(other))
    assert config_files.config_dir() == other
    assert resolve("robot", "only_here") == other / "robots" / "only_here.yaml"
    with pytest.raises(ConfigLookupError, match=r"robot 'tsnake': no file .*elsewhere/robots/tsnake.yaml"):
        resolve("robot", "tsnake")  # not silently taken from the source tree


def test_an_environment_variable_naming_nothing_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(config_files.CONFIG_DIR_ENV, str(tmp_path / "absent"))
    with pytest.raises(RobotConfigError, match=r"SNAKE_CONFIG_DIR=.*absent: not a directory"):
        resolve_robot_path("tsnake")


def test_an_install_prefix_wins_over_the_checkout_around_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A build inside a checkout: the checkout's config/ and the prefix's share/ both exist.
    checkout = tmp_path / "checkout"
    _config_tree(checkout / "config")
    prefix = checkout / "install" / "snake_core"
    share = _config_tree(prefix / "share" / "snake_core" / "config")
    module = _fake_module(prefix)
    assert config_files.installed_config_dir(module) == share
    assert config_files.source_config_dir(module) == checkout / "config"
    monkeypatch.setattr(config_files, "__file__", str(module))
    assert config_files.config_dir() == share
    assert resolve("robot", "tsnake").read_text().startswith(f"# {share} ")


def test_a_kept_directory_that_is_gone_is_looked_up_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # The directory found is kept between calls (a fit builds a twin per rollout); it is checked each
    # time, so an install prefix removed under a running process gives way to the checkout around it.
    checkout = tmp_path / "checkout"
    _config_tree(checkout / "config")
    prefix = checkout / "install" / "snake_core"
    share = _config_tree(prefix / "share" / "snake_core" / "config")
    monkeypatch.setattr(config_files, "__file__", str(_fake_module(prefix)))
    assert config_files.config_dir() == share
    assert config_files.config_dir() == share   # kept
    for sub in config_files.SUBDIRS.values():
        for f in (share / sub).glob("*"):
            f.unlink()
        (share / sub).rmdir()
    assert config_files.config_dir() == checkout / "config"
    assert resolve("robot", "tsnake") == checkout / "config" / "robots" / "tsnake.yaml"


def test_the_source_tree_is_the_last_resort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    checkout = tmp_path / "checkout"
    _config_tree(checkout / "config")
    module = checkout / "src" / "snake_core" / "snake_core" / "config_files.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    assert config_files.installed_config_dir(module) is None
    monkeypatch.setattr(config_files, "__file__", str(module))
    assert config_files.config_dir() == checkout / "config"


def test_nowhere_to_look_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    module = _fake_module(tmp_path / "bare")
    monkeypatch.setattr(config_files, "__file__", str(module))
    with pytest.raises(WorldConfigError, match=r"cannot find the configuration directory.*set SNAKE_CONFIG_DIR"):
        resolve("world", "flat", WorldConfigError)


@pytest.mark.parametrize(("text", "is_path"), [
    ("tsnake", False), ("wheeled_snake", False), ("tsnake.yaml", True), ("my.yml", True),
    ("robots/tsnake", True), ("/abs/robot", True), ("./x", True),
])
def test_names_and_paths_are_told_apart(text: str, is_path: bool):
    assert looks_like_path(text) is is_path


def test_a_path_is_taken_as_given_relative_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "mine.yaml").write_text("x: 1\n")
    monkeypatch.chdir(tmp_path)
    assert resolve("world", "mine.yaml") == Path("mine.yaml")
    with pytest.raises(ConfigLookupError, match=r"^absent\.yaml: world file not found$"):
        resolve("world", "absent.yaml")
    with pytest.raises(ConfigLookupError, match="empty name"):
        resolve("world", "")


def test_loaders_use_the_lookup_and_their_own_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(RobotConfigError, match=r"robot 'nonexistent': no file .*robots/nonexistent.yaml"):
        load_robot("nonexistent")
    assert default_config_path() == ROOT / "config" / "experiments" / "slippage_case_studies.yaml"
    assert load_case_study("case_study_2", "slippage_case_studies")["n_joints"] == 3  # a name in experiments/
    monkeypatch.setenv(config_files.CONFIG_DIR_ENV, str(_config_tree(tmp_path / "c")))
    with pytest.raises(SlippageError, match=r"experiment 'slippage_case_studies': no file"):
        load_case_study("case_study_2")
