"""Torch-free policy runtime: numpy + onnxruntime only (safe to install on a robot computer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


class OnnxPolicy:
    """Loads an exported bundle and maps observations to actions with onnxruntime."""

    def __init__(self, path: str | Path, intra_op_threads: int = 1):
        import onnxruntime as ort

        path = Path(path)
        if not path.is_file():
            raise ValueError(f"bundle {path} does not exist (export one with `ctrl-rl export <run>`)")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_threads
        try:
            self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own Fail/InvalidProtobuf/InvalidGraph types
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            size = path.stat().st_size
            raise ValueError(f"bundle {path} ({size} bytes) is not a loadable ONNX model ({reason[:160]}); "
                             "re-export it with `ctrl-rl export <run>`") from None
        meta = self.session.get_modelmeta().custom_metadata_map
        self.metadata: dict[str, Any] = {}
        for k, v in meta.items():
            try:
                self.metadata[k] = json.loads(v)
            except json.JSONDecodeError:
                self.metadata[k] = v
        inputs = {i.name: i for i in self.session.get_inputs()}
        if "obs" not in inputs or not isinstance(inputs["obs"].shape[1], int):
            raise ValueError(f"bundle {path} has no 'obs' input of fixed width (inputs {sorted(inputs)}): "
                             "it was not written by `ctrl-rl export`")
        self.obs_dim = int(inputs["obs"].shape[1])
        # flow policies (FPO) take their initial noise as an input: zeros = the deterministic action
        self.noise_dim = int(inputs["noise"].shape[1]) if "noise" in inputs else 0

    def __call__(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float32)
        single = obs.ndim == 1
        if single:
            obs = obs[None]
        if obs.shape[-1] != self.obs_dim:
            raise ValueError(f"observation has {obs.shape[-1]} values; the policy expects {self.obs_dim}")
        feeds = {"obs": obs}
        if self.noise_dim:
            feeds["noise"] = (np.zeros((len(obs), self.noise_dim), np.float32) if noise is None
                              else np.asarray(noise, dtype=np.float32).reshape(len(obs), self.noise_dim))
        actions = self.session.run(None, feeds)[0]
        return actions[0] if single else actions
