"""ONNX export: parity with torch, dynamic batch, metadata, refusal, and a torch-free runtime."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from ctrl_rl.app.export import export
from ctrl_rl.app.train import train
from ctrl_rl.export.onnx_policy import ParityError, check_parity, export_onnx
from ctrl_rl.nets.actor_critic import GaussianActor

TINY = ["task=pendulum", "env.num_envs=16", "algo.num_steps_per_env=8", "algo.actor_hidden=[16]",
        "algo.critic_hidden=[16]", "runner.max_iterations=2", "runner.progress=false"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("logs")
    return train(TINY + [f"runner.log_root={root}"])


def test_export_matches_torch_and_carries_metadata(run_dir):
    import onnxruntime as ort

    path = export(str(run_dir), [])
    assert path == run_dir / "exported" / "policy.onnx"
    ckpt = torch.load(run_dir / "model_2.pt", weights_only=False)
    from ctrl_rl.algos.checkpoints import config_from_dict
    from ctrl_rl.algos.ppo import PPO

    cfg = config_from_dict(ckpt["config"])
    alg = PPO(cfg.algo, ckpt["obs_dims"], ckpt["action_dim"], 1, "cpu")
    alg.load_state_dict(ckpt["algo"])
    sess = ort.InferenceSession(str(path))
    for batch in (1, 7, 1000):  # the batch dimension is dynamic
        obs = np.random.default_rng(batch).normal(size=(batch, 3)).astype(np.float32) * 4
        with torch.no_grad():
            expected = alg.model.actor(torch.from_numpy(obs)).clamp(-1, 1).numpy()
        got = sess.run(None, {"obs": obs})[0]
        assert got.shape == (batch, 1)
        assert np.abs(got - expected).max() <= 1e-5
    meta = sess.get_modelmeta().custom_metadata_map
    assert meta["task"] == "pendulum" and json.loads(meta["obs_dims"]) == {"policy": 3}
    assert json.loads(meta["action_bounds"]) == [-1.0, 1.0] and len(meta["config_hash"]) == 16
    assert json.loads(meta["step_dt"]) == pytest.approx(0.05)


def test_parity_check_catches_a_different_graph(tmp_path):
    actor = GaussianActor(3, 2, [8], "elu", 1.0, "scalar", 1e-3, 10.0, normalize_obs=True)
    out = tmp_path / "policy.onnx"
    export_onnx(actor, 3, (-1.0, 1.0), out, {"task": "t"})
    with torch.no_grad():
        actor.net[0].weight.add_(1e-3)  # torch side drifts from the exported graph
    from ctrl_rl.export.onnx_policy import ExportedPolicy

    with pytest.raises(ParityError, match="refusing to write"):
        check_parity(ExportedPolicy(actor, (-1.0, 1.0)), out.read_bytes(),
                     np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32))


def test_export_refuses_to_write_when_parity_fails(tmp_path, monkeypatch):
    import ctrl_rl.export.onnx_policy as ex

    def failing(*args, **kwargs):
        raise ParityError("ONNX output differs; refusing to write the bundle")

    monkeypatch.setattr(ex, "check_parity", failing)
    actor = GaussianActor(3, 1, [8], "elu", 1.0, "scalar", 1e-3, 10.0, normalize_obs=False)
    with pytest.raises(ParityError):
        ex.export_onnx(actor, 3, (-1.0, 1.0), tmp_path / "exported" / "policy.onnx", {})
    assert not (tmp_path / "exported" / "policy.onnx").exists()


def test_runtime_runs_without_torch(run_dir):
    path = export(str(run_dir), [])
    code = f"""
import sys
sys.modules["torch"] = None  # any import of torch now fails
from ctrl_rl.deploy.runtime import OnnxPolicy
import numpy as np
p = OnnxPolicy({str(path)!r})
a = p(np.zeros(3, dtype=np.float32))
assert a.shape == (1,) and p.metadata["task"] == "pendulum", (a, p.metadata)
assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_a_bundle_is_the_file_its_exported_folder_or_its_run(run_dir, tmp_path):
    """Users pass ``<run>/exported/`` or the run itself as often as the file (2026-12-03: sim2sim said the
    folder did not exist); a folder without the file says so and names what to pass."""
    from ctrl_rl.deploy.runtime import OnnxPolicy, bundle_file

    path = export(str(run_dir), [])
    assert bundle_file(str(path.parent)) == bundle_file(str(run_dir)) == str(path)
    assert OnnxPolicy(run_dir / "exported").metadata["task"] == "pendulum"
    assert bundle_file(str(tmp_path)) == str(tmp_path)  # nothing inside: as given
    with pytest.raises(ValueError, match="is a folder with no policy.onnx in it .*<run>/exported/policy.onnx"):
        OnnxPolicy(tmp_path)


def test_parity_is_relative_to_the_actions_magnitude():
    """float32 rounding grows with the outputs: an unbounded policy whose actions reach 20 may differ by
    ~1e-5 between two correct runtimes (a trained Go1 policy did: 1.03e-05). The bound is 1e-5 up to
    actions of 1, relative beyond; a different graph still fails at any magnitude (test above)."""
    from ctrl_rl.export.onnx_policy import PARITY_TOL, parity_bound

    assert parity_bound(np.array([0.5, -0.2]), PARITY_TOL) == PARITY_TOL
    assert parity_bound(np.array([3.0, -20.0]), PARITY_TOL) == pytest.approx(20 * PARITY_TOL)
    assert parity_bound(np.zeros(0), PARITY_TOL) == PARITY_TOL
