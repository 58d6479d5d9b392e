"""The install contract: a plain ``colcon build`` (no ``--symlink-install``) is complete.

docker/Dockerfile builds the workspace that way, which copies the data files instead of
linking them, so a file the nodes or the ``snake`` command read but ``setup.py`` forgets
is simply absent on the robot (the calibration was once: the gait silently ran the
placeholder k). The workspace is built here into a temporary directory and everything
below runs from that installed tree only: the environment of its ``local_setup.bash``,
the executables where ``ros2 run`` finds them (``lib/<package>/``), a working directory
outside the repository and no ``SNAKE_CONFIG_DIR``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("snake_core", "snake_hardware", "snake_ros", "snake_tools")
_BUILD_TIMEOUT_S = 600.0  # failure bound of the build on a loaded machine, not a speed requirement
_RUN_TIMEOUT_S = 300.0  # failure bound of one command


@dataclass(frozen=True)
class Install:
    """A plain colcon install of the workspace and the environment it sets up."""

    prefix: Path  # --install-base (isolated layout: one prefix per package)
    env: dict[str, str]  # environment after sourcing the install's local_setup.bash
    cwd: Path  # a working directory outside the repository

    def share(self, package: str) -> Path:
        """``share/<package>`` of the package's install prefix."""
        return self.prefix / package / "share" / package

    def executable(self, package: str, name: str) -> Path:
        """Where ``ros2 run <package> <name>`` finds the executable."""
        return self.prefix / package / "lib" / package / name

    def run(self, *cmd: str | Path) -> subprocess.CompletedProcess[str]:
        """Run a command in the installed environment."""
        return subprocess.run([str(c) for c in cmd], cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=_RUN_TIMEOUT_S, check=False)


def _clean_env() -> dict[str, str]:
    env = os.environ.copy()
    for key in ("SNAKE_CONFIG_DIR", "PYTHONPATH", "AMENT_PREFIX_PATH", "COLCON_PREFIX_PATH"):
        env.pop(key, None)
    return env


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    """Build the four packages with a plain ``colcon build`` into a temporary directory."""
    colcon = shutil.which("colcon") or str(Path(sys.executable).parent / "colcon")
    base = tmp_path_factory.mktemp("plain_install")
    cwd = base / "elsewhere"
    cwd.mkdir()
    env = _clean_env()
    build = subprocess.run(
        [colcon, "--log-base", str(base / "log"), "build", "--base-paths", str(ROOT / "src"),
         "--build-base", str(base / "build"), "--install-base", str(base / "install"),
         "--packages-select", *PACKAGES, "--event-handlers", "console_cohesion-", "summary-"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S, check=False)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    sourced = subprocess.run(
        ["bash", "-c", f'source "{base / "install" / "local_setup.bash"}" && env -0'],
        cwd=cwd, env=env, capture_output=True, timeout=_RUN_TIMEOUT_S, check=True)
    installed_env = dict(item.split("=", 1) for item in sourced.stdout.decode().split("\0") if "=" in item)
    yield Install(base / "install", installed_env, cwd)


def _expected_install_files() -> dict[Path, Path]:
    """Source file -> where the install must hold it (relative to the install prefix).

    ``config/<subdir>/...`` (robots, worlds, calibration, experiments) belongs to
    snake_core, which looks them up; the node params files at the top of ``config/``, the
    launch files, the URDFs and the RViz config to snake_ros, whose launch files use them.
    """
    expected: dict[Path, Path] = {}
    for path in sorted((ROOT / "config").rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(ROOT / "config")
        pkg = "snake_ros" if len(rel.parts) == 1 else "snake_core"
        expected[path] = Path(pkg) / "share" / pkg / "config" / rel
    for path in sorted((ROOT / "launch").glob("*.launch.py")):
        expected[path] = Path("snake_ros/share/snake_ros/launch") / path.name
    for path in sorted((ROOT / "urdf").glob("*.urdf")):
        expected[path] = Path("snake_ros/share/snake_ros/urdf") / path.name
    for path in sorted((ROOT / "rviz").glob("*.rviz")):
        expected[path] = Path("snake_ros/share/snake_ros/rviz") / path.name
    return expected


def test_every_file_the_stack_reads_is_installed_as_a_copy(install: Install) -> None:
    expected = _expected_install_files()
    assert any(p.parent.parent.name == "calibration" for p in expected)
    assert any(p.parent.name == "experiments" for p in expected)
    for source, rel in expected.items():
        target = install.prefix / rel
        assert target.is_file(), f"{source.relative_to(ROOT)} is not installed (expected {rel})"
        assert not target.is_symlink(), f"{rel}: a plain build copies"
        assert target.read_bytes() == source.read_bytes(), rel


def test_installed_code_finds_the_installed_config(install: Install) -> None:
    probe = (
        "import json, snake_core, snake_hardware, snake_ros, snake_tools\n"
        "from snake_core import config_files\n"
        "from snake_core.robot import calibration_path\n"
        "from snake_core.slippage.studies import default_config_path\n"
        "from snake_tools.experiment.follow import load_settings\n"
        "print(json.dumps({'modules': [m.__file__ for m in (snake_core, snake_hardware, snake_ros, snake_tools)],\n"
        "  'config_dir': str(config_files.config_dir()), 'calibration': str(calibration_path('tsnake')),\n"
        "  'case_studies': str(default_config_path()), 'follow_robots': sorted(load_settings()['robots'])}))\n"
    )
    result = install.run(sys.executable, "-c", probe)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    for module in found["modules"]:  # the installed copies, not the editable source tree
        assert Path(module).is_relative_to(install.prefix), module
    config = install.share("snake_core") / "config"
    assert Path(found["config_dir"]) == config
    assert Path(found["calibration"]) == config / "calibration" / "tsnake" / "twin.yaml"
    assert Path(found["case_studies"]) == config / "experiments" / "slippage_case_studies.yaml"
    source_settings = yaml.safe_load((ROOT / "config" / "experiments" / "follow_experiment.yaml").read_text())
    assert found["follow_robots"] == sorted(source_settings["robots"])


def test_installed_nodes_find_the_installed_dds_profile(install: Install) -> None:
    probe = "from snake_ros.dds_profile import snake_profile; print(snake_profile())"
    result = install.run(sys.executable, "-c", probe)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == install.share("snake_ros") / "config" / "fastdds_profile.xml"


def test_installed_snake_gait_runs_the_calibrated_coefficients(install: Install) -> None:
    calibrated = yaml.safe_load((ROOT / "config" / "calibration" / "tsnake" / "twin.yaml").read_text())[
        "gaits"]["reduction"]
    nominal = yaml.safe_load((ROOT / "config" / "robots" / "tsnake.yaml").read_text())["gaits"]["reduction"]
    assert calibrated["k"] != nominal["k"]  # else this test could not tell them apart
    result = install.run(install.executable("snake_tools", "snake"), "gait", "--gait", "rolling",
                         "--duration", "0.1", "--json")
    assert result.returncode == 0, result.stderr
    reduction = json.loads(result.stdout)["reduction"]
    assert reduction["k"] == pytest.approx(calibrated["k"])
    assert reduction["d_prime"] == pytest.approx(calibrated["d_prime"])


def test_installed_snake_slippage_reads_the_case_studies(install: Install) -> None:
    args = ("slippage", "evaluate", "--q-deg", "-135", "-135", "--json")
    installed = install.run(install.executable("snake_tools", "snake"), *args)
    assert installed.returncode == 0, installed.stderr
    result = json.loads(installed.stdout)
    study = yaml.safe_load((ROOT / "config" / "experiments" / "slippage_case_studies.yaml").read_text())
    assert result["kappa"] == pytest.approx(study["case_study_1"]["kappa"])
    assert result["mu_s"] == pytest.approx(study["case_study_1"]["mu_s"])
    # The same numbers as the source tree's command: the same file was read.
    source = subprocess.run([shutil.which("snake") or "snake", *args], cwd=ROOT, env=_clean_env(),
                            capture_output=True, text=True, timeout=_RUN_TIMEOUT_S, check=False)
    assert source.returncode == 0, source.stderr
    assert result == json.loads(source.stdout)


@pytest.mark.graph
def test_installed_gait_node_runs_with_its_installed_params_file(install: Install, ros) -> None:
    from sensor_msgs.msg import JointState

    from snake_ros.qos import COMMAND_QOS

    robot = yaml.safe_load((ROOT / "config" / "robots" / "tsnake.yaml").read_text())
    cmds = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    params = install.share("snake_ros") / "config" / "gait_node.yaml"
    env = {**install.env, "ROS_DOMAIN_ID": os.environ["ROS_DOMAIN_ID"]}
    log = install.cwd / "gait_node.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(install.executable("snake_ros", "gait_node")), "--ros-args",
                                 "--params-file", str(params)], cwd=install.cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        assert ros.spin_until(lambda: len(cmds) > 2 or proc.poll() is not None), log.read_text()
        assert proc.poll() is None, log.read_text()
        assert list(cmds[-1].name) == [j["name"] for j in robot["joints"]]
    finally:
        ros.stop(proc)


@pytest.mark.graph
def test_installed_slippage_monitor_finds_its_case_study(install: Install, ros) -> None:
    params = install.share("snake_ros") / "config" / "slippage_monitor.yaml"
    env = {**install.env, "ROS_DOMAIN_ID": os.environ["ROS_DOMAIN_ID"]}
    log = install.cwd / "slippage_monitor.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(install.executable("snake_ros", "slippage_monitor")), "--ros-args",
                                 "--params-file", str(params)], cwd=install.cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        # Its publishers exist only once the case study is loaded.
        assert ros.spin_until(lambda: ros.node.count_publishers("/slippage/status") > 0
                              or proc.poll() is not None), log.read_text()
        assert proc.poll() is None, log.read_text()
    finally:
        ros.stop(proc)


def test_the_robot_image_builds_the_way_this_test_does():
    """docker/Dockerfile: a plain colcon build of the same trees this test installs."""
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    builds = [line for line in dockerfile.splitlines() if "colcon build" in line]
    assert builds and not any("--symlink-install" in line for line in builds)
    copied = {line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY ")}
    assert {"config", "urdf", "launch", "src"} <= copied
