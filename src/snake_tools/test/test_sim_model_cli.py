"""``snake sim-model``: writes a compilable MJCF and a summary; bad input exits 2 naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import mujoco
import pytest
import yaml

from snake_tools.cli import main

ROOT = Path(__file__).resolve().parents[3]


def test_sim_model_writes_mjcf_and_json_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "model.xml"
    assert main(["sim-model", "--robot", "tsnake", "--world", "uneven", "--json", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    body = yaml.safe_load((ROOT / "config" / "robots" / "tsnake.yaml").read_text())["body"]
    ground = yaml.safe_load((ROOT / "config" / "worlds" / "uneven.yaml").read_text())["ground"]
    assert summary["actuators"] == 3 * body["n_modules"]
    assert summary["backbone_length_m"] == pytest.approx(body["n_modules"] * body["module_length"])
    assert summary["total_mass_kg"] == pytest.approx(body["n_modules"] * body["module_mass"])
    assert summary["terrain_max_height_variation_m"] == pytest.approx(ground["max_height_variation"])
    assert summary["terrain_height_std_m"] == pytest.approx(ground["height_std"], rel=1e-3)
    model = mujoco.MjModel.from_xml_path(str(out))  # the written file stands alone
    assert model.nu == summary["actuators"]
    assert model.nhfield == 1


def test_sim_model_bad_world_field_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((ROOT / "config" / "worlds" / "pegs.yaml").read_text())
    data["obstacles"]["pegs"]["diameter"] = -1
    bad = tmp_path / "bad_pegs.yaml"
    bad.write_text(yaml.safe_dump(data))
    assert main(["sim-model", "--world", str(bad)]) == 2
    assert "bad_pegs.yaml: obstacles.pegs.diameter" in capsys.readouterr().err


def test_sim_model_builds_the_twin_of_a_calibration_target(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    cfg = tmp_path / "config"
    shutil.copytree(ROOT / "config", cfg)
    (cfg / "calibration" / "tsnake" / "lab.yaml").write_text(
        yaml.safe_dump({"twin": {"servo": {"twist": {"armature": 0.02}}}}))
    monkeypatch.setenv("SNAKE_CONFIG_DIR", str(cfg))
    out = tmp_path / "lab.xml"
    assert main(["sim-model", "--calibration-target", "lab", "--json", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["twin_params_file"] == str(cfg / "calibration" / "tsnake" / "lab.yaml")
    model = mujoco.MjModel.from_xml_path(str(out))
    twist = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"m{k}_twist") for k in (1, 2)]
    lateral = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "m1_lateral")
    assert [model.dof_armature[model.jnt_dofadr[j]] for j in twist] == pytest.approx([0.02, 0.02])
    # other types keep the default: the XM430-W350's rotor inertia times its gear ratio squared
    assert model.dof_armature[model.jnt_dofadr[lateral]] == pytest.approx(9e-8 * 353.5 ** 2)
    assert main(["sim-model", "--calibration-target", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert "nowhere" in err and "targets: lab, twin" in err
