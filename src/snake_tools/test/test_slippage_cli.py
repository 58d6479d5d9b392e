"""``snake slippage``: the JSON contract, agreement with the core, bad input exits 2 naming the flag."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from snake_core.slippage import build_system, evaluate
from snake_core.slippage.studies import joint_grid, load_case_study, params_from_config, sweep, table_2
from snake_tools.cli import main


def test_case_study_2_json_contract_matches_core(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["slippage", "case-study-2", "--json", "--step-deg", "45", "--directions", "24", "--workers", "1",
            "--no-progress"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    params = params_from_config(load_case_study("case_study_2"))
    q = joint_grid(3, -135, 135, 45)
    cfg = load_case_study("case_study_2")
    for sc in ("1", "2", "3"):
        for key in ("best_a_obj", "worst_a_obj", "best_sr", "worst_sr"):
            assert isinstance(out[sc][key], float)
        assert 0 <= out[sc]["worst_sr"] <= out[sc]["best_sr"] <= 1
        assert out[sc]["paper"]["best_sr"] > 0
        ref = table_2({int(sc): sweep(params, q, int(sc), n_directions=24, radii=tuple(cfg["radii"]))})[sc]
        assert out[sc]["best_a_obj"] == pytest.approx(ref["best_a_obj"], rel=1e-12)
        assert out[sc]["worst_sr"] == pytest.approx(ref["worst_sr"], rel=1e-12)
    # ideal wheels (3) can only raise the best slippage ratio w.r.t. no wheels (1)
    assert out["3"]["best_sr"] > out["1"]["best_sr"]


def test_evaluate_given_torque_matches_core(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slippage", "evaluate", "--q-deg", "-135", "-135", "--tau", "0.05", "0.01", "--scenario", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["2"]
    params = params_from_config(load_case_study("case_study_1"))
    system = build_system(params, np.deg2rad([0, 0, 0, -135, -135]) * [0, 0, 0, 1, 1], 2)
    ev = evaluate(system, np.array([[0.05, 0.01]]))
    assert out["a_obj"] == pytest.approx(ev.a_obj_norm[0])
    assert out["qdd"] == pytest.approx(ev.qdd_norm[0])
    assert out["sr"] == pytest.approx(ev.sr[0])
    assert out["lambda"] == pytest.approx(ev.lam[0].tolist())


def test_case_study_1_writes_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slippage", "case-study-1", "--json", "--step-deg", "90", "--directions", "12", "--workers", "1",
                 "--no-progress", "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_configurations"] == 16
    assert sorted(Path(f).name for f in out["figures"]) == sorted(
        ["slippage_fig4_kappa1.png", "slippage_fig4_kappa10.png", "slippage_fig4_kappa100.png",
         "slippage_case1_configurations.png"])
    for f in out["figures"]:
        assert Path(f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slippage", "evaluate", "--q-deg", "10"]) == 2
    assert "--q-deg" in capsys.readouterr().err
    assert main(["slippage", "evaluate", "--q-deg", "10", "20", "--kappa", "-3"]) == 2
    assert "kappa" in capsys.readouterr().err


@pytest.mark.parametrize("scenario", ["1", "3"])
def test_evaluate_reports_the_exact_maximum_and_its_input(scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Interface contract: sr_max and sr_max_tau exact; the CLI's own --tau confirms the value."""
    q_deg = ["-135", "-135"]
    assert main(["slippage", "evaluate", "--q-deg", *q_deg, "--scenario", scenario, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)[scenario]
    params = params_from_config(load_case_study("case_study_1"))
    system = build_system(params, np.deg2rad([0, 0, 0, -135, -135]), int(scenario))
    from snake_core.slippage import ellipsoid_inputs, unit_directions

    dense = evaluate(system, ellipsoid_inputs(system, unit_directions(2, 50000), (1.0,))).sr.max()
    assert dense <= out["sr_max"] + 1e-12
    assert out["sr_max"] - dense < 1e-6  # 50000 directions resolve even the narrow wedge
    tau = [f"{v!r}" for v in out["sr_max_tau"]]
    assert main(["slippage", "evaluate", "--q-deg", *q_deg, "--scenario", scenario, "--tau", *tau, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)[scenario]
    assert again["sr"] == pytest.approx(out["sr_max"], rel=1e-12)
    if scenario == "3":
        assert out["sr_max"] == pytest.approx(0.98754, abs=1e-5)


def test_batch_matches_single_evaluations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"q_deg": [-135.0, -135.0], "tau": [0.05, 0.01]}, {"q_deg": [30.0, -60.0], "tau": [0.02, 0.03]}]
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(rows))
    assert main(["slippage", "batch", "--input", str(path), "--scenario", "3", "--json",
                 "--out", str(tmp_path / "out.csv")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_rows"] == 2
    for row, given in zip(out["rows"], rows, strict=True):
        args = ["slippage", "evaluate", "--q-deg", *map(str, given["q_deg"]), "--scenario", "3", "--json"]
        assert main(args) == 0
        single = json.loads(capsys.readouterr().out)["3"]
        assert row["3/sr_max"] == pytest.approx(single["sr_max"], rel=1e-12)
        assert row["3/a_obj_max"] == pytest.approx(single["a_obj_max"], rel=1e-12)
        assert main([*args, "--tau", *map(str, given["tau"])]) == 0
        at_tau = json.loads(capsys.readouterr().out)["3"]
        assert row["3/sr"] == pytest.approx(at_tau["sr"], rel=1e-12)
    header = (tmp_path / "out.csv").read_text().splitlines()[0].split(",")
    assert "3/sr_max" in header and "tau[1]" in header


def test_batch_rejects_a_bad_file_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("q1,q2,q3\n1,2,3\n")
    assert main(["slippage", "batch", "--input", str(path)]) == 2
    err = capsys.readouterr().err
    assert "--input" in err and "bad.csv" in err
