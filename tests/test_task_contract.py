"""The task contract (``ctrl_rl.task``): every registered MuJoCo-family task meets it, and a task written
here against it alone (a planar arm reaching for a target, from an MJCF string, no robot YAML, no
``VelocityTask``) registers in one call, passes the conformance suite, and trains, evaluates and
exports through the CLI like a shipped task."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import onnx
import pytest

mujoco = pytest.importorskip("mujoco")
import torch  # noqa: E402
from task_conformance import check_task  # noqa: E402

from ctrl_rl.robots.terms import ObsTerm  # noqa: E402
from ctrl_rl.tasks import TASKS, register_task, tasks  # noqa: E402


@pytest.mark.parametrize("name", sorted(tasks()))
def test_every_registered_task_meets_the_contract(name):
    check_task(name)


# ---- a new task: a planar two-link arm reaching for a target -------------------------------------
ARM = """
<mujoco model="planar_arm">
  <option timestep="0.01" integrator="implicitfast"/>
  <default>
    <joint type="hinge" axis="0 0 1" limited="true" range="-2.6 2.6" damping="0.05"/>
    <geom type="capsule" size="0.01" contype="0" conaffinity="0"/>
    <position kp="1" ctrllimited="true" ctrlrange="-2.6 2.6"/>
  </default>
  <worldbody>
    <body name="upper_arm">
      <joint name="shoulder"/>
      <geom fromto="0 0 0 0.12 0 0"/>
      <body name="forearm" pos="0.12 0 0">
        <joint name="elbow"/>
        <geom fromto="0 0 0 0.1 0 0"/>
        <site name="fingertip" pos="0.1 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator><position joint="shoulder"/><position joint="elbow"/></actuator>
  <sensor>
    <jointpos name="joint_pos_0" joint="shoulder"/><jointpos name="joint_pos_1" joint="elbow"/>
    <jointvel name="joint_vel_0" joint="shoulder"/><jointvel name="joint_vel_1" joint="elbow"/>
    <framepos name="fingertip" objtype="site" objname="fingertip"/>
  </sensor>
</mujoco>
"""
"""Horizontal (gravity does no work), no contacts; position actuators, about critically damped."""


@dataclass
class ReachConfig:
    """The reach task's parameters (``task.kwargs.<name>``)."""

    robot: ClassVar[None] = None  # the arm is this file's MJCF: no robot YAML

    episode_length_s: float = 1.0
    """Episode time limit (s)."""
    decimation: int = 4
    """Physics steps (0.01 s each) per control step."""
    target_radius: tuple[float, float] = (0.08, 0.2)
    """Targets are drawn this far (m) from the shoulder, in any direction (the arm reaches 0.22)."""

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ReachConfig:
        valid = [f.name for f in fields(cls)]
        if set(kwargs) - set(valid):
            raise ValueError(f"the reach task has no parameter {sorted(set(kwargs) - set(valid))}; valid: {valid}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()})

    def apply_physics(self, model: Any, robot: None) -> Any:
        return model  # the MJCF's own options


class ReachTask:
    """Fingertip to target: reward minus the distance (m); actions in [-1, 1] are joint targets over the range."""

    action_bounds = (-1.0, 1.0)

    @classmethod
    def build_model(cls, cfg: ReachConfig, robot: None) -> tuple[Any, dict[str, slice]]:
        model = mujoco.MjModel.from_xml_string(ARM)
        adr, dim = model.sensor_adr, model.sensor_dim
        return model, {model.sensor(i).name: slice(adr[i], adr[i] + dim[i]) for i in range(model.nsensor)}

    def __init__(self, cfg: ReachConfig, robot: None, model: Any, layout: dict[str, slice], num_envs: int,
                 device: torch.device) -> None:
        self.cfg, self.robot, self.layout, self.num_envs, self.device = cfg, robot, layout, num_envs, device
        self.decimation = cfg.decimation
        self.step_dt = float(model.opt.timestep) * cfg.decimation
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt)
        self.action_dim = model.nu
        self.joint_range = torch.tensor(model.jnt_range[:, 1], dtype=torch.float32, device=device)
        self.obs_terms = {"policy": (ObsTerm("joint_pos", 2), ObsTerm("joint_vel", 2, scale=0.1),
                                     ObsTerm("target", 2), ObsTerm("to_target", 2))}
        self.obs_dims = {"policy": 8}
        self.target = torch.zeros(num_envs, 2, device=device)
        self.out_of_bounds = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.metrics: dict[str, torch.Tensor] = {}
        self.post_step_signals: dict[str, torch.Tensor] | None = None

    def _signals(self, physics: Any) -> dict[str, torch.Tensor]:
        sd = physics.sensordata.to(torch.float32, copy=True)
        read = lambda *names: torch.cat([sd[:, self.layout[n]] for n in names], -1)  # noqa: E731
        return {"joint_pos": read("joint_pos_0", "joint_pos_1"), "joint_vel": read("joint_vel_0", "joint_vel_1"),
                "fingertip": read("fingertip")[:, :2]}

    def randomize_model(self, physics: Any, gen: torch.Generator) -> None:
        """Every arm the same."""

    def begin_reset(self, physics: Any, rows: torch.Tensor, gen: torch.Generator) -> None:
        """No curriculum."""

    def sample_initial_state(self, physics: Any, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.num_envs
        qpos = torch.rand(n, 2, generator=gen, device=self.device) - 0.5
        return qpos, torch.zeros(n, physics.model.nv, device=self.device)

    def reset_rows(self, rows: torch.Tensor, gen: torch.Generator) -> None:
        lo, hi = self.cfg.target_radius
        r = lo + (hi - lo) * torch.rand(self.num_envs, generator=gen, device=self.device)
        angle = (torch.rand(self.num_envs, generator=gen, device=self.device) * 2 - 1) * math.pi
        fresh = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], -1)
        self.target = torch.where(rows[:, None], fresh, self.target)

    def sample_obs_noise(self, gen: torch.Generator) -> None:
        return None

    def joint_targets(self, actions: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return actions.clamp(-1.0, 1.0) * self.joint_range

    def evaluate(self, physics: Any, episode_length: torch.Tensor,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        s = self._signals(physics)
        distance = (s["fingertip"] - self.target).norm(dim=-1)
        self.post_step_signals, self.metrics = s, {"distance": distance}
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return -distance, terminated, {"Metrics/distance": distance.mean()}

    def observe(self, physics: Any, noise: None, signals: dict[str, torch.Tensor] | None = None) -> dict:
        s = self._signals(physics) if signals is None else signals
        return {"policy": torch.cat([s["joint_pos"], 0.1 * s["joint_vel"], self.target,
                                     self.target - s["fingertip"]], -1)}

    def perturb(self, physics: Any, episode_length: torch.Tensor, gen: torch.Generator) -> bool:
        return False

    def check_simulation(self) -> None:
        """Nothing to fall through."""

    def get_state(self, physics: Any) -> dict[str, torch.Tensor]:
        return {"target": self.target.clone()}

    def set_state(self, state: dict[str, torch.Tensor], physics: Any) -> None:
        self.target = state["target"].to(self.device).clone()

    def mirror(self) -> None:
        return None

    def deploy_metadata(self) -> dict[str, Any]:
        return {"obs_terms": [t.to_dict() for t in self.obs_terms["policy"]], "joint_names": ["shoulder", "elbow"],
                "control_dt": self.step_dt, "decimation": self.decimation}


@pytest.fixture
def reach_task():
    """The one registration."""
    register_task("planar_reach", config=ReachConfig, task=ReachTask,
                  tune={"ppo": {"algo.actor_hidden": [32, 32], "algo.critic_hidden": [32, 32], "env.num_envs": 8}})
    yield "planar_reach"
    del TASKS["planar_reach"]


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_a_task_written_against_the_contract_passes_the_conformance_suite(reach_task, sim):
    assert ReachTask.__mro__ == (ReachTask, object)  # no base class: the contract is structural
    check_task(reach_task, sim=sim, num_envs=4, steps=30)  # 25 steps an episode: rows reset inside the checks


def test_a_new_task_trains_evaluates_and_exports_through_the_cli(reach_task, tmp_path, capsys):
    from ctrl_rl.app.cli import main
    from ctrl_rl.sims import task_parameters

    described = {name: doc for name, _, doc in task_parameters("mujoco", reach_task, {})}
    assert described["target_radius"].startswith("Targets are drawn")  # `--help` prints its parameters
    logs = tmp_path / "logs"
    main(["train", f"task={reach_task}", "algo.num_steps_per_env=16", "runner.max_iterations=2",
          f"runner.log_root={logs}", "runner.progress=false"])
    run = next((logs / "ppo" / reach_task).iterdir())
    assert (run / "model_2.pt").is_file()
    capsys.readouterr()
    main(["eval", str(run), "--episodes", "4"])
    result = capsys.readouterr().out.strip().splitlines()[-1]
    assert result.startswith("RESULT mean_return=") and "episodes=4" in result, result
    main(["export", str(run)])  # the ONNX parity check passes, and the bundle has no robot to carry
    meta = {p.key: p.value for p in onnx.load(str(run / "exported" / "policy.onnx")).metadata_props}
    assert meta["task"] == reach_task and json.loads(meta["obs_dims"]) == {"policy": 8}
    assert json.loads(meta["joint_names"]) == ["shoulder", "elbow"] and json.loads(meta["physics_dt"]) == 0.01
    assert "robot_derived" not in meta and "robot" not in meta
