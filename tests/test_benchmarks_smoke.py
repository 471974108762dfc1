"""Smoke tests of the benchmarks: tiny sizes, every framework and row runs, the RESULT line parses."""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "ppo_throughput.py"
MISSING = [m for m in ("rsl_rl", "stable_baselines3", "tensordict")
           if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(bool(MISSING), reason="needs the bench extra (pip install -e '.[bench]'): "
                                          f"missing {', '.join(MISSING)}")
def test_ppo_throughput_runs_all_frameworks() -> None:
    # --threads 1: two OpenMP threads on a busy 2-core CI box make these tiny updates ~100x slower
    cmd = [sys.executable, str(SCRIPT), "--num-envs", "64", "--steps", "8", "--iterations", "1",
           "--hidden", "32", "32", "--threads", "1", "--timeout", "120"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    last = lines[-1]
    assert re.match(r"^RESULT ours_sps=\d", last), proc.stdout
    for key in ("compiled_sps", "rsl_rl_sps", "sb3_sps", "vs_rsl_rl", "eager_vs_rsl_rl", "vs_sb3", "compile_s",
                "compile_s_cached"):
        assert re.search(rf"\b{key}=-?\d", last), f"{key} missing or nan:\n{proc.stdout}"
    assert "failed" not in proc.stdout, proc.stdout
    assert sum(line.startswith(("| ours ", "| ours_compiled ", "| rsl_rl ", "| sb3 ")) for line in lines) == 4


RECURRENT_SCRIPT = SCRIPT.parent / "recurrent_ppo.py"


@pytest.mark.skipif(bool(MISSING), reason=f"needs the bench extra: missing {', '.join(MISSING)}")
def test_recurrent_ppo_runs_both_frameworks() -> None:
    cmd = [sys.executable, str(RECURRENT_SCRIPT), "--smoke", "--threads", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    values = dict(kv.split("=", 1) for kv in last.split()[1:])
    assert last.startswith("RESULT ") and "failed" not in proc.stdout, proc.stdout
    for key in ("ours_sps", "rsl_rl_sps", "vs_rsl_rl"):
        assert float(values[key]) > 0, f"{key}={values[key]}:\n{proc.stdout}"
    for key in ("ours_return", "rsl_rl_return"):  # 4 iterations: returns of an untrained policy, but finite
        assert math.isfinite(float(values[key])) and float(values[key]) < 0, proc.stdout


SIM_SCRIPT = SCRIPT.parent / "sim_throughput.py"


def test_sim_throughput_runs_tiny() -> None:
    """``benchmarks/sim_throughput.py --envs 8 --quick``: every row runs, the RESULT line parses."""
    cmd = [sys.executable, str(SIM_SCRIPT), "--envs", "8", "--quick"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT "), proc.stdout
    values = dict(kv.split("=", 1) for kv in last.split()[1:])
    assert values["envs"] == "8"
    for key in ("ours_sps", "async_sps", "limit_sps", "frac_of_limit", "vs_async", "policy_sps",
                "policy_frac_of_limit"):
        assert float(values[key]) > 0, f"{key}={values[key]}:\n{proc.stdout}"
    for row in ("| python loop", "| ours: CpuPhysics.step |", "| ours: mujoco VecEnv.step |",
                "| ours: mujoco VecEnv.step + policy |",
                "| gymnasium SyncVectorEnv |", "| gymnasium AsyncVectorEnv", "| rough task VecEnv.step |",
                "| height scan alone (lookup) |"):
        assert row in proc.stdout, f"row {row!r} missing:\n{proc.stdout}"
    for key in ("rough_sps", "rough_vs_flat", "scan_us", "scan_frac"):
        assert float(values[key]) > 0, f"{key}={values[key]}:\n{proc.stdout}"


def test_quadruped_rough_runs_tiny(tmp_path: Path) -> None:
    """``benchmarks/quadruped_rough.py`` at 2 iterations: trains, evaluates every case, films, RESULT parses."""
    cmd = [sys.executable, str(SCRIPT.parent / "quadruped_rough.py"), "--iterations", "2", "--episodes", "4",
           "--video-steps", "20", "--train-override", "env.num_envs=32", "--train-override",
           "algo.num_steps_per_env=8", "--train-override", f"runner.log_root={tmp_path}",
           "--train-override", "task.kwargs.terrain.num_rows=2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT train_minutes="), proc.stdout
    values = dict(kv.split("=", 1) for kv in last.split()[1:])
    for key in ("stairs_up_success", "stairs_down_success", "slope_up_success", "slope_down_success"):
        assert 0.0 <= float(values[key]) <= 1.0
    assert 0.0 <= float(values["terrain_level"]) <= 1.0  # two rows: levels 0 and 1
    assert list(tmp_path.glob("ppo/quadruped_velocity_rough/*/rough_stairs.mp4"))


def test_humanoid_walk_runs_tiny(tmp_path: Path) -> None:
    """``benchmarks/humanoid_walk.py`` at 1 iteration: trains the humanoid, evaluates, films, RESULT parses."""
    cmd = [sys.executable, str(SCRIPT.parent / "humanoid_walk.py"), "--iterations", "1", "--episodes", "2",
           "--video-steps", "10", "--train-override", "env.num_envs=16", "--train-override",
           "algo.num_steps_per_env=8", "--train-override", f"runner.log_root={tmp_path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT train_minutes="), proc.stdout
    values = dict(kv.split("=", 1) for kv in last.split()[1:])
    assert values["passed"] in ("0", "1") and int(values["falls"]) >= 0
    assert list(tmp_path.glob("ppo/humanoid_velocity_flat/*/walk.mp4"))


SAC_SCRIPT = SCRIPT.parent / "sac_vs_sb3.py"


@pytest.mark.skipif(importlib.util.find_spec("stable_baselines3") is None,
                    reason="needs the bench extra (pip install -e '.[bench]')")
def test_sac_vs_sb3_runs_tiny() -> None:
    """``benchmarks/sac_vs_sb3.py --smoke``: both frameworks train on both tasks, RESULT parses."""
    proc = subprocess.run([sys.executable, str(SAC_SCRIPT), "--smoke", "--timeout", "240"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "failed" not in proc.stdout, proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT task=Pendulum-v1 "), proc.stdout
    values = dict(kv.split("=", 1) for kv in last.split()[1:])
    for key in ("ours_return", "sb3_return", "wallclock_ratio", "vs_sb3_same_recipe",
                "InvertedDoublePendulum_ours_return", "InvertedDoublePendulum_sb3_return"):
        assert values[key] != "nan", f"{key}=nan:\n{proc.stdout}"
    assert float(values["ours_return"]) < 0 < float(values["InvertedDoublePendulum_ours_return"])
    for row in ("| sb3 | 1 |", "| ours | 1 |", "| ours x64 | 1 |", "| sb3 x64 | 1 |"):
        assert row in proc.stdout, f"row {row!r} missing:\n{proc.stdout}"


def test_lift_pipeline_runs_tiny(tmp_path: Path) -> None:
    """``benchmarks/lift.py`` at toy sizes: demonstrations, BC, residual PPO (scored by its kept model) and PPO
    from scratch at the same wall clock; the table and the RESULT line."""
    cmd = [sys.executable, str(SCRIPT.parent / "lift.py"), "--demos", "2", "--residual-iterations", "1",
           "--eval-episodes", "2", "--bc-passes", "1", "--envs", "8", "--root", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "| residual PPO on the BC base, " in out.stdout and "| PPO from scratch, same wall clock, " in out.stdout
    result = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    for key in ("bc_success=", "residual_success=", "residual_final_success=", "ppo_scratch_success=", "passed="):
        assert key in result, result


def test_lift_baselines_run_tiny(tmp_path: Path) -> None:
    """``benchmarks/lift.py --only-baselines``: SAC and PQL from scratch and Uni-O4 from 2 demonstrations
    (``tune/<algo>_lift.yaml``), each stopped by SIGTERM after its wall clock, even one that ends before training's
    handler is installed; rows and RESULT."""
    cmd = [sys.executable, str(SCRIPT.parent / "lift.py"), "--only-baselines", "0.01", "--baselines", "sac", "pql",
           "uni_o4", "--demos", "2", "--eval-episodes", "2", "--envs", "8", "--root", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    for row in ("SAC from scratch", "PQL from scratch", "Uni-O4, offline on the demonstrations then online"):
        assert f"| {row}, same wall clock, " in out.stdout, out.stdout[-2000:]
    values = dict(kv.split("=", 1) for kv in out.stdout.strip().splitlines()[-1].split()[1:])
    assert float(values["sac_scratch_success"]) >= 0 and float(values["pql_minutes"]) > 0, values
    assert float(values["uni_o4_success"]) >= 0 and (tmp_path / "lift_2.hdf5").is_file(), values


def test_props_vs_ppo_runs_tiny() -> None:
    """``benchmarks/props_vs_ppo.py`` at 4 iterations: both learners run, the RESULT line parses."""
    cmd = [sys.executable, str(SCRIPT.parent / "props_vs_ppo.py"), "--seeds", "1", "--max-iterations", "4",
           "--eval-every", "2", "--eval-episodes", "4", "--threads", "1", "--override", "env.num_envs=32"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT task=pendulum seeds=1 "), proc.stdout
    values = dict(kv.split("=", 1) for kv in last.split()[1:])
    assert float(values["ppo_final"]) < 0 and float(values["props_final"]) < 0
    assert "| props | 1 |" in proc.stdout and "| ppo | 1 |" in proc.stdout


def test_bc_residual_runs_tiny() -> None:
    """``benchmarks/bc_residual.py`` at toy sizes: expert, datasets, BC, residual and scratch runs, RESULT parses."""
    cmd = [sys.executable, str(SCRIPT.parent / "bc_residual.py"), "--seeds", "1", "--expert-iterations", "2",
           "--bc-iterations", "1", "--residual-iterations", "2", "--envs", "2", "--steps", "50", "--few", "1",
           "--eval-episodes", "4"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=SCRIPT.parent.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    result = [line for line in out.stdout.splitlines() if line.startswith("RESULT expert=")]
    fields = dict(kv.split("=") for kv in result[-1].split()[1:])
    assert {"expert", "zero", "bc_gaussian", "bc_flow", "bc_few", "residual", "scratch"} <= set(fields)
    assert all(math.isfinite(float(v)) for v in fields.values())


@pytest.mark.parametrize("per_seed", [[], ["--behavior-per-seed", "--scratch-iterations", "3"]],
                         ids=["shared", "per_seed"])
def test_uni_o4_runs_tiny(per_seed: list[str]) -> None:
    """``benchmarks/uni_o4.py`` at toy sizes: behavior PPO (one for all seeds, or each seed's own PPO run
    paused), dataset, BC, Uni-O4 both phases, PPO; RESULT parses."""
    cmd = [sys.executable, str(SCRIPT.parent / "uni_o4.py"), "--seeds", "1", "--behavior-iterations", "2",
           "--envs", "4", "--steps", "300", "--bc-iterations", "1", "--online-iterations", "2", "--eval-every", "1",
           "--eval-episodes", "4", *per_seed, "--override", "algo.pretrain_iterations=1", "algo.improve_iterations=1",
           "algo.updates_per_iteration=5", "--override-all", "env.num_envs=16"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=SCRIPT.parent.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    result = [line for line in out.stdout.splitlines() if line.startswith("RESULT task=pendulum")]
    fields = dict(kv.split("=") for kv in result[-1].split()[1:])
    assert {"behavior_det", "behavior_noisy", "behavior_data", "bc", "uni_o4_offline", "offline_beats_behavior",
            "offline_beats_data", "ppo_final", "collapses", "fewer_steps"} <= set(fields)
    assert all(math.isfinite(float(fields[k])) for k in ("uni_o4_offline", "bc", "behavior_noisy"))


def test_uni_o4_stage_is_kept_reused_for_online_settings_and_refused_for_others(tmp_path) -> None:
    """``--stage``: the second run reuses the first's PPO, dataset, BC and offline phase (same numbers)
    with other online settings and length; an override that changes the offline phase is refused by name."""
    cmd = [sys.executable, str(SCRIPT.parent / "uni_o4.py"), "--seeds", "1", "--behavior-iterations", "2",
           "--envs", "4", "--steps", "300", "--bc-iterations", "1", "--online-iterations", "2", "--eval-every", "1",
           "--eval-episodes", "4", "--behavior-per-seed", "--scratch-iterations", "3", "--stage", str(tmp_path),
           "--override-all", "env.num_envs=16", "--override", "algo.pretrain_iterations=1",
           "algo.improve_iterations=1", "algo.updates_per_iteration=5"]

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([*cmd, *extra], capture_output=True, text=True, timeout=600, cwd=SCRIPT.parent.parent)

    def result(out: subprocess.CompletedProcess) -> dict[str, str]:
        assert out.returncode == 0, out.stderr[-3000:]
        line = [x for x in out.stdout.splitlines() if x.startswith("RESULT task=pendulum")][-1]
        return dict(kv.split("=") for kv in line.split()[1:])

    first = result(run())
    assert (tmp_path / "seed1" / "stage.pt").exists() and (tmp_path / "seed1" / "data.hdf5").exists()
    again = run("algo.online_init_std=0.5", "algo.schedule=adaptive", "--online-iterations", "3")
    assert "kept stage" in again.stdout
    second = result(again)
    for key in ("behavior_det", "behavior_noisy", "behavior_data", "bc", "uni_o4_offline", "ppo_final", "ppo_steps"):
        assert second[key] == first[key], key
    refused = run("algo.bc_alpha=0.5")
    assert refused.returncode != 0
    assert "made with other settings (config.algo.bc_alpha: 0.1 -> 0.5)" in refused.stderr


def test_scaling_runs_tiny() -> None:
    """``benchmarks/scaling.py`` at toy sizes: PPO and SAC, 1 process and 2 under torchrun; RESULT parses."""
    cmd = [sys.executable, str(SCRIPT.parent / "scaling.py"), "--envs", "16", "--iterations", "3",
           "--sac-iterations", "4", "--skip", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=SCRIPT.parent.parent)
    assert out.returncode == 0, out.stderr[-10000:]
    result = [line for line in out.stdout.splitlines() if line.startswith("RESULT device=cpu")]
    fields = dict(kv.split("=") for kv in result[-1].split()[1:])
    for algo in ("ppo", "sac"):
        assert float(fields[f"{algo}_fps_1"]) > 0 and float(fields[f"{algo}_fps_2"]) > 0
        assert 0 < float(fields[f"{algo}_efficiency_2"]) < 2


TINY_TRAIN = ["--train-override", "env.num_envs=16", "--train-override", "algo.num_steps_per_env=8"]


def test_symmetry_runs_tiny(tmp_path: Path) -> None:
    """``benchmarks/symmetry.py`` at 1 iteration, one seed, both modes: the table and the RESULT line."""
    cmd = [sys.executable, str(SCRIPT.parent / "symmetry.py"), "--iterations", "1", "--seeds", "0", "--episodes", "2",
           "--gait-envs", "2", "--gait-steps", "20", *TINY_TRAIN, "--train-override", f"runner.log_root={tmp_path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    values = dict(kv.split("=", 1) for kv in last.split()[1:])
    assert last.startswith("RESULT ") and float(values["none_gait_asymmetry"]) > 0, proc.stdout
    assert math.isfinite(float(values["asymmetry_ratio_augment"]))


def test_teacher_student_runs_tiny(tmp_path: Path) -> None:
    """``benchmarks/teacher_student.py`` at 1 iteration per stage, one seed: teacher, student, CTS, RESULT."""
    cmd = [sys.executable, str(SCRIPT.parent / "teacher_student.py"), "--teacher-iterations", "1",
           "--student-iterations", "1", "--seeds", "0", "--episodes", "2", *TINY_TRAIN,
           "--train-override", f"runner.log_root={tmp_path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    values = dict(kv.split("=", 1) for kv in last.split()[1:])
    assert last.startswith("RESULT teacher_return="), proc.stdout
    assert values["passed"] in ("0", "1") and math.isfinite(float(values["cts_fraction"]))


GPU_SCRIPT = SCRIPT.parent / "gpu_suite.py"


def _gpu_suite(tmp_path: Path, *args: str) -> tuple[list[str], dict]:
    """``benchmarks/gpu_suite.py --tiny --device cpu *args``: its stdout lines (the last one a ``RESULT``
    of a run where no section failed) and the figures of its ``--json``."""
    import json

    out = tmp_path / "suite.json"
    cmd = [sys.executable, str(GPU_SCRIPT), "--tiny", "--device", "cpu", "--log-root", str(tmp_path / "logs"),
           "--json", str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("RESULT device=cpu ") and "failed=none" in lines[-1], proc.stdout[-3000:]
    return lines, json.loads(out.read_text())


GPU_SECTIONS = ("torch", "physics", "alloc", "ppo", "walk", "rough", "humanoid", "newrobot")
"""Every section but ``mjlab``, which needs mjlab's own environment (the test below)."""


@pytest.mark.skipif(bool(MISSING), reason=f"needs the bench extra: missing {', '.join(MISSING)}")
def test_gpu_suite_runs_tiny_on_cpu(tmp_path: Path) -> None:
    """``benchmarks/gpu_suite.py --tiny``: every section (pendulum PPO beside rsl_rl, MuJoCo Warp physics
    and VecEnv rows and options one by one, allocation against measured maxima, PPO on sim=mjwarp with its
    per-stage split, train-then-evaluate with the GPU preset, rough terrain with the height scan and its
    crossings, the humanoid with PPO and with FastSAC's settings, the gait recipe on ctrl_dog) runs end to
    end at toy sizes on warp's CPU device; the last line is one RESULT."""
    lines, figures = _gpu_suite(tmp_path, "--sections", *GPU_SECTIONS)
    sections = {ln.split()[1] for ln in lines if ln.startswith("RESULT section=")}
    assert sections == {f"section={s}" for s in GPU_SECTIONS}, sections
    for key in ("physics.quad_physics_sps_8", "physics.quad_vecenv_sps_8", "physics.quad_physics_sps_it4",
                "ppo.sps", "torch.rsl_rl_sps_64"):
        assert figures[key] > 0, (key, figures)
    assert figures["alloc.quad_contacts_max"] <= figures["alloc.quad_nconmax"]
    assert figures["alloc.quad_rows_max"] <= figures["alloc.quad_njmax"]
    assert math.isfinite(figures["walk.forward_velocity"]) and figures["walk.iterations"] == 2
    assert {"ms_sim", "ms_inference", "ms_update"} <= {k.split(".")[1] for k in figures if k.startswith("ppo.ms_")}
    assert 0 <= figures["rough.ctrl_quad_stairs_up_0.05"] <= 1 and figures["rough.ctrl_quad_terrain_level"] >= 0
    assert figures["humanoid.seeds"] == 1 and figures["humanoid.sac_iterations"] == 2
    assert figures["newrobot.passed"] in (0, 1) and math.isfinite(figures["newrobot.forward_velocity"])


MJLAB_PYTHON = GPU_SCRIPT.parent.parent / ".venv-mjlab" / "bin" / "python"


@pytest.mark.skipif(bool(MISSING) or not MJLAB_PYTHON.exists(),
                    reason="needs the bench extra and .venv-mjlab (bash scripts/setup_mjlab_env.sh)")
def test_gpu_suite_mjlab_section_runs_tiny_on_cpu(tmp_path: Path) -> None:
    """``gpu_suite.py --sections mjlab --tiny``: ours on the Go1 in this process and mjlab's Go1 flat
    velocity task in ``.venv-mjlab`` (its env stepped directly and through our adapter, our PPO on it,
    train then evaluate at a fixed 0.5 m/s command without pushes), side by side in one RESULT line."""
    _, figures = _gpu_suite(tmp_path, "--sections", "mjlab")
    assert figures["mjlab.mjlab_available"] == 1, figures
    for key in ("ours_sps_8", "mjlab_raw_sps_8", "mjlab_adapter_sps_8", "ours_ppo_sps", "mjlab_ppo_sps"):
        assert figures[f"mjlab.{key}"] > 0, (key, figures)
    assert figures["mjlab.mjlab_walk_iterations"] == 2 and math.isfinite(figures["mjlab.mjlab_walk_forward_velocity"])


def run_benchmark(script: str, *args: str, timeout: float = 300, **kwargs) -> tuple[str, dict[str, str]]:
    """Run ``benchmarks/<script>`` with ``args``; its stdout and its last line's ``key=value`` pairs, which
    must be a ``RESULT`` line of a run that exited 0."""
    proc = subprocess.run([sys.executable, str(SCRIPT.parent / script), *args], capture_output=True, text=True,
                          timeout=timeout, **kwargs)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT "), proc.stdout[-2000:]
    return proc.stdout, dict(kv.split("=", 1) for kv in last.split()[1:])


def test_busy_machine_runs_the_quickstart_beside_a_burner() -> None:
    """``benchmarks/busy_machine.py --smoke`` at 2 iterations: idle and one-burner rows, RESULT parses."""
    stdout, values = run_benchmark("busy_machine.py", "--iterations", "2", "--smoke")
    assert float(values["threads_null_idle_s"]) > 0, stdout
    assert float(values["threads_null_x_1burners"]) > 0 and "| null | 1 |" in stdout, stdout


@pytest.mark.slow
def test_gait_benchmark_trains_evaluates_and_judges_in_sim2sim(tmp_path) -> None:
    """``benchmarks/gait.py`` at tiny sizes on ctrl_dog: train, eval's report, export, sim2sim's report; the
    untrained policy fails the bars, the RESULT line says so (``passed=0``) and parses."""
    stdout, values = run_benchmark("gait.py", "--robot", "ctrl_dog", "--iterations", "1", "--episodes", "2",
                                   "--seconds", "4", "--train-override", "env.num_envs=16", timeout=600, cwd=tmp_path)
    assert values["robot"] == "ctrl_dog" and values["eval_gait"] == "FAIL" and values["sim2sim_gait"] == "FAIL"
    assert values["passed"] == "0" and float(values["train_minutes"]) > 0 and "| ctrl_dog | 1 |" in stdout


def test_gait_benchmark_judges_a_checkpoint_as_the_run_it_comes_from(tmp_path, monkeypatch) -> None:
    """``gait.py --checkpoint``: its table and RESULT name the run's own robot and seed (``params/config.yaml``),
    not the flags' defaults."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    from gait import run_identity

    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "config.yaml").write_text(
        "seed: 2\ntask:\n  name: humanoid_velocity_flat\n  kwargs:\n    robot: unitree_g1\n")
    assert run_identity(tmp_path) == run_identity(tmp_path / "model_500.pt") == \
        ("humanoid_velocity_flat", "unitree_g1", 2)


def test_gait_benchmark_trains_each_task_with_its_own_preset(monkeypatch) -> None:
    """One recipe per task: the quadrupeds' gait preset whatever the robot, the humanoid's (the G1's own)."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    from gait import BUDGET_MIN, recipe

    assert recipe("quadruped_velocity_flat", "unitree_go1") == recipe("quadruped_velocity_flat", "ctrl_dog") == \
        ["tune=ppo_quadruped_velocity_flat_fast"]
    assert recipe("humanoid_velocity_flat", "unitree_g1") == ["tune=ppo_humanoid_velocity_flat_g1"]
    assert recipe("humanoid_velocity_flat", "ctrl_humanoid") == []  # the task's own preset, which train picks
    assert BUDGET_MIN == {"quadruped_velocity_flat": 20.0, "humanoid_velocity_flat": 120.0}
    tune = Path(__file__).resolve().parent.parent / "src" / "ctrl_rl" / "tasks" / "locomotion" / "tune"
    for name in ("ppo_quadruped_velocity_flat_fast", "ppo_humanoid_velocity_flat_g1", "ppo_humanoid_velocity_flat"):
        assert (tune / f"{name}.yaml").is_file(), name


def test_band_split_puts_a_trot_in_the_gait_band_and_a_tick_flip_above_it(monkeypatch) -> None:
    """Hand-computed: a 2.5 Hz sine of amplitude 1 at 50 Hz has all of its second difference in the band, RMS
    (2 - 2 cos(2 pi 2.5 / 50)) / sqrt(2) = 0.0693; an alternation +-1 has all of it above, and nothing below."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    from gait_jitter import band_split

    t = np.arange(400) * 0.02
    smooth, above = band_split(np.sin(2 * np.pi * 2.5 * t)[:, None], 0.02)
    rms = (2 - 2 * math.cos(2 * math.pi * 2.5 / 50)) / math.sqrt(2)  # over whole periods; 398 samples are not
    assert smooth == pytest.approx(rms, rel=5e-3)
    assert above == pytest.approx(0.0, abs=1e-9)
    smooth, above = band_split(np.where(np.arange(400) % 2, 1.0, -1.0)[:, None], 0.02)
    assert smooth == pytest.approx(0.0, abs=1e-9) and above == pytest.approx(1.0)


@pytest.mark.slow
def test_gait_jitter_measures_a_tiny_run_under_each_condition(tmp_path) -> None:
    """``benchmarks/gait_jitter.py`` on a 1-iteration ctrl_quad run: a table row per condition, the Jacobian
    per observation term, and a RESULT line with a finite smoothness for each."""
    train = [sys.executable, "-m", "ctrl_rl", "train", "task=quadruped_velocity_flat", "env.num_envs=16",
             "runner.max_iterations=1", "runner.run_name=jitter_smoke"]
    proc = subprocess.run(train, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = next((tmp_path / "logs").glob("ppo/quadruped_velocity_flat/*_jitter_smoke"))
    stdout, values = run_benchmark("gait_jitter.py", "--checkpoint", str(run), "--envs", "2", "--seconds", "2",
                                   cwd=tmp_path)
    for key in ("training", "no_noise", "no_delay", "neither"):
        assert math.isfinite(float(values[key])) and float(values[key]) >= 0, stdout
    assert "| neither (as sim2sim) |" in stdout and "| joint_vel |" in stdout, stdout


def test_play_video_films_a_tiny_run_and_reads_the_file_back() -> None:
    """``benchmarks/play_video.py --steps 5 --profile``: makes its own untrained run, one frame per control
    step at 50 fps and 640x480 in the file, the profile table, RESULT parses."""
    stdout, values = run_benchmark("play_video.py", "--steps", "5", "--profile")
    assert float(values["seconds"]) > 0, stdout
    assert (values["frames"], values["fps"], values["width"], values["height"]) == ("5", "50", "640", "480")
    assert float(values["video_s"]) == 0.1 and "| function | calls | s | share |" in stdout


def test_preset_times_projects_a_run_from_its_steady_rate() -> None:
    """``benchmarks/preset_times.py`` at 3 iterations of the default preset: the table row and a projection of
    its 600 iterations that is the warm-up plus 598 steady iterations."""
    stdout, values = run_benchmark("preset_times.py", "--presets", "default", "--iterations", "3", "--warmup", "2")
    row = next(line for line in stdout.splitlines() if line.startswith("| default |"))
    rollout, update, per = (float(x) for x in row.split("|")[4:7])
    assert rollout + update == pytest.approx(per, abs=0.011), row  # the two stages are the iteration
    assert float(values["default_min"]) >= per * 598 / 60 > 0, stdout
