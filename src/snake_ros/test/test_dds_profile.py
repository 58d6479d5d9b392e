"""The snake nodes' Fast DDS profile: found, valid, given to node processes, and never over a user's own."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from snake_ros import dds_profile, runtime
from snake_ros.dds_profile import PROFILE_ENV, PROFILE_FILE, snake_profile, use_snake_profile

_FASTDDS_DEFAULT_ANNOUNCEMENT_S = 3.0  # Fast DDS's default leaseAnnouncement period, s
_NS = {"dds": "http://www.eprosima.com"}


@pytest.fixture
def no_user_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (PROFILE_ENV, "FASTRTPS_DEFAULT_PROFILES_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no DEFAULT_FASTDDS_PROFILES.xml here


def test_the_shipped_profile_is_found_and_shortens_the_announcement_period(repo_root: Path):
    path = snake_profile()
    assert path == repo_root / "config" / PROFILE_FILE
    root = ET.parse(path).getroot()
    participants = root.findall("dds:profiles/dds:participant", _NS)
    assert len(participants) == 1 and participants[0].get("is_default_profile") == "true"
    lease = participants[0].find("dds:rtps/dds:builtin/dds:discovery_config/dds:leaseAnnouncement", _NS)
    assert lease is not None
    period = float(lease.findtext("dds:sec", "0", _NS)) + float(lease.findtext("dds:nanosec", "0", _NS)) * 1e-9
    assert 0.0 < period < _FASTDDS_DEFAULT_ANNOUNCEMENT_S


def test_an_installed_profile_is_preferred(tmp_path: Path):
    installed = tmp_path / "share" / "snake_ros" / "config" / PROFILE_FILE
    installed.parent.mkdir(parents=True)
    installed.write_text("<dds/>")
    module = tmp_path / "lib" / "python3" / "site-packages" / "snake_ros" / "dds_profile.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    assert snake_profile(module) == installed


@pytest.mark.usefixtures("no_user_profile")
def test_without_a_user_profile_the_snake_profile_is_set():
    env: dict[str, str] = {}
    assert use_snake_profile(env) == snake_profile()
    assert env == {PROFILE_ENV: str(snake_profile())}


@pytest.mark.parametrize("name", [PROFILE_ENV, "FASTRTPS_DEFAULT_PROFILES_FILE"])
@pytest.mark.usefixtures("no_user_profile")
def test_a_profile_given_in_the_environment_wins(name: str):
    env = {name: "/somewhere/mine.xml"}
    assert use_snake_profile(env) is None
    assert env == {name: "/somewhere/mine.xml"}


@pytest.mark.parametrize("name", ["DEFAULT_FASTDDS_PROFILES.xml", "DEFAULT_FASTRTPS_PROFILES.xml"])
@pytest.mark.usefixtures("no_user_profile")
def test_a_default_profile_in_the_working_directory_wins(tmp_path: Path, name: str):
    (tmp_path / name).write_text("<dds/>")
    env: dict[str, str] = {}
    assert use_snake_profile(env) is None
    assert env == {}


@pytest.mark.usefixtures("no_user_profile")
def test_a_node_process_starts_rcl_with_the_snake_profile(monkeypatch: pytest.MonkeyPatch):
    seen: list[str | None] = []

    def init(*args: object, **kwargs: object) -> None:
        import os

        seen.append(os.environ.get(PROFILE_ENV))
        raise RuntimeError("stop here")  # run_nodes reports it as a refused command line

    monkeypatch.setattr(runtime.rclpy, "init", init)
    assert runtime.run_nodes([runtime.NodeSpec(lambda: None)], ["node"]) == runtime.EXIT_BAD_CONFIG  # type: ignore[arg-type, return-value]
    assert seen == [str(dds_profile.snake_profile())]
