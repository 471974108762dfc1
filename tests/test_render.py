"""Headless MuJoCo rendering, MP4 writing and ``ctrl-rl play --video``: real GL, real H.264.

Needs the Debian GL libraries from ``scripts/setup_render.sh`` (``scripts/test.sh`` runs it).
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import time

import av
import mujoco
import numpy as np
import pytest
import torch

from ctrl_rl.app.play import play
from ctrl_rl.env import VecEnv
from ctrl_rl.sims import SIMS, SimBackend
from ctrl_rl.sims.render import OffscreenRenderer
from ctrl_rl.utils.video import VideoWriter, video_fps

BOX_XML = """
<mujoco>
  <visual><headlight ambient=".4 .4 .4" diffuse=".6 .6 .6"/></visual>
  <worldbody>
    <light directional="true" pos="0 0 5" dir="0 0 -1"/>
    <geom type="plane" size="50 50 .1" rgba=".5 .5 .5 1"/>
    <camera name="fixed" pos="0 -3 1" xyaxes="1 0 0 0 .3 1"/>
    <body name="box" pos="0 0 .1">
      <freejoint/>
      <geom type="box" size=".1 .1 .1" rgba="1 0 0 1"/>
    </body>
  </worldbody>
</mujoco>
"""
W, H = 320, 240


def red_centroid(img: np.ndarray) -> tuple[float, float, int]:
    """``(x, y, pixels)`` of the red box in an RGB image (``nan`` when it is not visible)."""
    r, g, b = (img[..., i].astype(int) for i in range(3))
    mask = (r > 100) & (r > 2 * g) & (r > 2 * b)
    ys, xs = np.nonzero(mask)
    if not xs.size:
        return float("nan"), float("nan"), 0
    return float(xs.mean()), float(ys.mean()), int(xs.size)


def at_x(model: mujoco.MjModel, x: float, y: float = 0.0) -> np.ndarray:
    qpos = model.qpos0.copy()
    qpos[0], qpos[1] = x, y
    return qpos


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(BOX_XML)


@pytest.fixture(scope="module")
def renderer(model):
    with OffscreenRenderer(model, W, H) as r:
        yield r


def test_frame_shape_dtype_and_content(renderer, model):
    img = renderer.render_qpos(model.qpos0)
    assert img.shape == (H, W, 3) and img.dtype == np.uint8
    assert img.std() > 10  # not one flat colour
    assert red_centroid(img)[2] > 500  # the box is drawn
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    np.testing.assert_array_equal(renderer.render(data), img)  # render(data) and render_qpos agree


def test_tracking_camera_keeps_moving_body_centered(renderer, model):
    assert renderer.tracked_body == mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "box")
    with OffscreenRenderer(model, W, H, camera="fixed") as fixed:
        for x, y in [(0.0, 0.0), (2.0, 0.0), (-3.0, 1.0), (8.0, -2.0)]:
            cx, cy, n = red_centroid(renderer.render_qpos(at_x(model, x, y)))
            assert n > 500, (x, y)
            assert abs(cx - W / 2) < 0.1 * W and abs(cy - H / 2) < 0.15 * H, (x, y, cx, cy)
        # the fixed camera, for contrast, loses the box once it has moved away
        fx, _, fn = red_centroid(fixed.render_qpos(at_x(model, 8.0, -2.0)))
        assert fn == 0 or abs(fx - W / 2) > 0.3 * W


def test_camera_errors_name_the_choices(model):
    with pytest.raises(ValueError, match="cameras: \\['fixed'\\]"):
        OffscreenRenderer(model, W, H, camera="nope")
    armless = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='.1'/></worldbody></mujoco>")
    with pytest.raises(ValueError, match="no free joint"):
        OffscreenRenderer(armless, W, H, camera="track")


def test_video_roundtrip(tmp_path, renderer, model):
    path = tmp_path / "sub" / "box.mp4"
    sources = [renderer.render_qpos(at_x(model, 0.05 * i)) for i in range(25)]
    with VideoWriter(path, fps=20) as writer:
        for frame in sources:
            writer.write(frame)
    assert writer.frames == 25 and writer.duration == pytest.approx(1.25)
    assert sorted(p.name for p in path.parent.iterdir()) == ["box.mp4"]  # temp file renamed away
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264" and stream.average_rate == 20
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
    assert len(decoded) == 25
    assert decoded[0].shape == (H, W, 3)
    assert np.abs(decoded[12].astype(int) - sources[12]).mean() < 6  # lossy, but the same picture


def test_video_writer_is_atomic(tmp_path):
    path = tmp_path / "broken.mp4"
    with pytest.raises(RuntimeError, match="boom"), VideoWriter(path, fps=30) as writer:
        writer.write(np.zeros((64, 64, 3), np.uint8))
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []  # nothing half-written under any name
    with pytest.raises(ValueError, match="must end in .mp4"):
        VideoWriter(tmp_path / "x.gif", fps=30)


def test_video_fps_follows_control_dt():
    assert video_fps(0.05) == (pytest.approx(20.0), 1)
    fps, stride = video_fps(0.002)  # 500 Hz control: every 9th step, ~55.6 fps, still real time
    assert stride == 9 and fps == pytest.approx(1 / 0.018)


def _python(code: str, **env: str | None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    full.update({k: v for k, v in env.items() if v is not None})
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300)


SWITCH = f"""
import os, mujoco  # imported first, as an env would, before any backend is chosen
from ctrl_rl.sims.render import OffscreenRenderer
r = OffscreenRenderer(mujoco.MjModel.from_xml_string('''{BOX_XML}'''), 64, 48)
img = r.render_qpos(r.model.qpos0)
print(r.backend, os.environ['MUJOCO_GL'], img.shape, int(img.std() > 10))
"""


def test_backend_chosen_in_process_after_mujoco_import():
    r = _python(SWITCH)
    assert r.returncode == 0, r.stderr
    backend, exported, *_, ok = r.stdout.split()
    assert backend in ("egl", "osmesa") and exported == backend and ok == "1", r.stdout


@pytest.mark.skipif(ctypes.util.find_library("OSMesa") is None, reason="libosmesa6 not installed")
def test_user_mujoco_gl_is_respected():
    r = _python(SWITCH, MUJOCO_GL="osmesa")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["osmesa", "osmesa"]


def test_disabled_gl_is_a_clear_error():
    r = _python(SWITCH, MUJOCO_GL="disable")
    assert r.returncode != 0 and "MUJOCO_GL=disable disables rendering" in r.stderr


def test_play_video_on_an_env_without_frames_fails_before_running(tmp_path):
    out = tmp_path / "bandit.mp4"
    r = subprocess.run([sys.executable, "-m", "ctrl_rl", "play", "--agent", "zero", "task=bimodal_bandit",
                        "--video", str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "--video: sim 'torch' (task 'bimodal_bandit') cannot render frames" in r.stderr
    assert "sims that render" in r.stderr
    assert "playing" not in r.stdout and not out.exists()


def test_play_video_on_the_quickstart_pendulum_writes_an_mp4_of_the_swing(tmp_path, capsys):
    """The torch tasks draw themselves (numpy, no GL): the first policy a user trains can be watched."""
    out = tmp_path / "pendulum.mp4"
    play(None, ["task=pendulum"], agent="random", episodes=1, video=str(out), steps=40, seed=3)
    assert f"video: {out} (40 frames, 2.00 s at 20 fps" in capsys.readouterr().out
    assert out.stat().st_size > 1000
    with av.open(str(out)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == 40 and frames[0].shape == (240, 320, 3)
    assert any(np.abs(a.astype(int) - b).mean() > 0.5 for a, b in zip(frames, frames[1:], strict=False))


@pytest.mark.parametrize("task", ["pendulum", "cartpole_balance", "cartpole_swingup", "point_mass"])
def test_torch_task_frames_put_the_moving_part_where_the_state_says(task):
    """The orange part (bob, pole, point) sits where the state puts it, in the world-to-pixel map."""
    from ctrl_rl.sims import make_env

    env = make_env("torch", task, 2, seed=0)
    state = env._state
    frame = env.render_frame(1)
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8
    orange = (frame[..., 0] > 180) & (frame[..., 1] < 140) & (frame[..., 2] < 100)
    assert orange.sum() > 30
    cols = np.flatnonzero(orange.any(axis=0))
    if task == "pendulum":  # the bob's side follows sin(th)
        side = float(np.sin(state["th"][1]))
        mid = cols.mean() - 160
        assert abs(side) < 0.2 or np.sign(mid) == np.sign(side), (side, mid)
    elif task == "point_mass":  # the point at x = pos[0] on a 2.2 m wide view, 240 px tall
        x = float(state["pos"][1, 0])
        assert abs(cols.mean() - (160 + x * 240 / 2.2)) < 6
    else:  # the pole starts at the cart's x
        x = float(state["x"][1])
        scale = 320 / (2 * 2.7)
        assert cols.min() - 5 <= 160 + x * scale <= cols.max() + 5


class BoxEnv(VecEnv):
    """A minimal MuJoCo VecEnv that renders like the MuJoCo backends: env 0's qpos through render_qpos."""

    def __init__(self, num_envs: int, device, seed, **_):
        self.num_envs, self.device, self.action_dim = num_envs, torch.device(device), 1
        self.obs_dims, self.max_episode_length, self.step_dt = {"policy": 2}, 12, 0.05
        self.model = mujoco.MjModel.from_xml_string(BOX_XML)
        self.datas = [mujoco.MjData(self.model) for _ in range(num_envs)]
        self.t = np.zeros(num_envs, dtype=int)
        self._renderer: OffscreenRenderer | None = None

    def _obs(self):
        return {"policy": torch.tensor([[d.qpos[0], d.qvel[0]] for d in self.datas], dtype=torch.float32)}

    def reset(self, seed=None):
        for d in self.datas:
            mujoco.mj_resetData(self.model, d)
        self.t[:] = 0
        return self._obs()

    def step(self, actions):
        for d in self.datas:  # slide along +x: the tracking camera has to follow
            d.qpos[0] += 1.0 * self.step_dt
            mujoco.mj_forward(self.model, d)
        self.t += 1
        truncated = torch.tensor(self.t >= self.max_episode_length)
        for i in np.flatnonzero(self.t >= self.max_episode_length):
            mujoco.mj_resetData(self.model, self.datas[i])
            self.t[i] = 0
        zeros = torch.zeros(self.num_envs)
        return self._obs(), zeros + 1, torch.zeros_like(truncated), truncated, {}

    def render_frame(self, env_idx: int = 0) -> np.ndarray:
        if self._renderer is None:
            self._renderer = OffscreenRenderer(self.model, W, H)
        return self._renderer.render_qpos(self.datas[env_idx].qpos)

    def close(self):
        if self._renderer is not None:
            self._renderer.close()


def test_play_writes_video_of_env_0(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(SIMS, "mujoco_box", SimBackend(make=lambda task, n, device, seed, **kw: BoxEnv(n, device, seed),
                                                         tasks=lambda: ["box"], renders=True))
    out = tmp_path / "play.mp4"
    play(None, ["sim.name=mujoco_box", "task=box"], agent="zero", episodes=2, video=str(out), steps=20)
    text = capsys.readouterr().out
    assert f"video: {out} (20 frames, 1.00 s at 20 fps" in text  # one per step: the state the policy acts on
    assert "RESULT mean_return=12.0000" in text and "episodes=2" in text  # both envs ended once in 20 steps
    with av.open(str(out)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == 20 and frames[0].shape == (H, W, 3)
    cx, _, n = red_centroid(frames[11])  # after 11 steps: 0.55 m along x, still in the middle of the picture
    assert n > 500 and abs(cx - W / 2) < 0.1 * W


def test_play_realtime_paces_to_step_dt(capsys):
    start = time.perf_counter()
    play(None, ["task=pendulum"], agent="zero", episodes=1, realtime=True, steps=10)  # 10 x 0.05 s
    assert time.perf_counter() - start >= 0.45
    assert "RESULT episodes=0 steps=10" in capsys.readouterr().out


def test_renderer_quality_settings_leave_the_model_as_it_was(model):
    """The cheap context (no multisampling, a 1024 shadow map, a buffer of the frame's size) is the
    renderer's own: the model keeps its settings for any other renderer."""
    kept = (model.vis.quality.offsamples, model.vis.quality.shadowsize,
            model.vis.global_.offwidth, model.vis.global_.offheight)
    with OffscreenRenderer(model, 64, 48) as fast, \
            OffscreenRenderer(model, 64, 48, multisamples=None, shadow_size=None) as model_settings:
        a, b = fast.render_qpos(model.qpos0), model_settings.render_qpos(model.qpos0)
    assert (model.vis.quality.offsamples, model.vis.quality.shadowsize,
            model.vis.global_.offwidth, model.vis.global_.offheight) == kept
    assert red_centroid(a)[2] > 50 and np.abs(a.astype(int) - b).mean() < 10  # the same picture, edges aside


def test_threaded_encoder_writes_the_same_file_as_inline(tmp_path, renderer, model):
    sources = [renderer.render_qpos(at_x(model, 0.05 * i)) for i in range(12)]
    decoded = {}
    for threaded in (False, True):
        with VideoWriter(tmp_path / f"{threaded}.mp4", fps=20, threaded=threaded) as writer:
            for frame in sources:
                buffer = frame.copy()
                writer.write(buffer)
                buffer[:] = 0  # the writer copied it: a caller may reuse its buffer at once
        with av.open(str(tmp_path / f"{threaded}.mp4")) as container:
            decoded[threaded] = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    assert decoded[True].shape == decoded[False].shape == (12, H, W, 3)
    # the same frames, in order, each its own source: compared with the sources, not with each other, because
    # libx264's threads round differently run to run (one CI run: 0.5% of values apart, by up to 43 levels)
    for threaded, frames in decoded.items():
        error = np.abs(frames[:, None].astype(np.int16) - np.stack(sources)[None]).mean(axis=(2, 3, 4))
        assert (error.argmin(axis=1) == np.arange(12)).all(), (threaded, error.round(2))
        assert error.diagonal().max() < 6, (threaded, error.diagonal())


def test_progress_prints_a_line_per_fifth_with_an_eta(capsys):
    from ctrl_rl.app.play import _Progress

    progress = _Progress(10, tty=False)
    for done in range(1, 11):
        progress.update(done)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("|")[0].strip() for line in lines] == [
        "step 2/10 (20%)", "step 4/10 (40%)", "step 6/10 (60%)", "step 8/10 (80%)", "step 10/10 (100%)"]
    assert all("ETA 0:00:0" in line for line in lines) and lines[-1].endswith("ETA 0:00:00")


def test_play_video_of_the_quadruped_names_the_run_and_films_each_control_step(tmp_path, monkeypatch, capsys):
    """`play latest --video`: the checkpoint it picked is printed; one 640x480 frame per control step
    at 1/control_dt fps, each the state the agent acts on at that step (a replay renders the same pictures)."""
    from ctrl_rl.app.session import checked_env, load_policy
    from ctrl_rl.app.train import train
    from ctrl_rl.runners.episodes import random_policy

    monkeypatch.chdir(tmp_path)
    run = train(["task=quadruped_velocity_flat", "env.num_envs=8", "algo.num_steps_per_env=8",
                 "runner.max_iterations=1", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]",
                 "runner.progress=false"])
    capsys.readouterr()
    out, steps = tmp_path / "walk.mp4", 25
    play("latest", [], video=str(out), steps=steps, seed=7)
    text = capsys.readouterr().out
    assert f"checkpoint: {run / 'model_1.pt'} (the newest run under logs/)" in text
    assert "(1 env, 25 steps, recording env 0" in text and "step 25/25 (100%)" in text and "ETA" in text
    assert f"video: {out} (25 frames, 0.50 s at 50 fps, env 0" in text
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert stream.average_rate == 50 and (stream.width, stream.height) == (640, 480)
        assert len(list(container.decode(stream))) == steps

    # the timing of each frame, with an agent that moves the legs from the first step (an untrained policy barely does)
    play("latest", [], agent="random", video=str(out), steps=steps, seed=7)
    with av.open(str(out)) as container:
        frames = [f.to_ndarray(format="rgb24").astype(int) for f in container.decode(video=0)]
    cfg, _, _, state = load_policy("latest", [])
    env = checked_env(cfg, state, 1, 7)
    assert 1 / env.step_dt == pytest.approx(50)
    obs, policy, replayed = env.reset(seed=7), random_policy(env, 7), []
    for _ in range(steps):
        replayed.append(env.render_frame(0))
        obs, *_ = env.step(policy(obs))
    env.close()
    replayed = np.stack(replayed).astype(int)
    moving = np.ptp(replayed, axis=0).max(-1) > 40  # the pixels the legs cross: the rest is the same in every frame
    assert len(frames) == steps and moving.sum() > 5000
    diff = [[np.abs(f - r)[moving].mean() for r in replayed] for f in frames]  # diff[frame][replayed step]
    for i in range(1, steps - 1):  # lossy (about 5 per pixel there), but closest to the same step's state
        assert diff[i][i] < 8 and diff[i][i] < min(diff[i][i - 1], diff[i][i + 1]), (i, diff[i][i - 1:i + 2])
