"""Torch-free policy runtime: numpy + onnxruntime only (safe to install on a robot computer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def bundle_file(path: str) -> str:
    """A bundle as users name it: the ``policy.onnx`` file, or the ``exported/`` folder or the run folder that
    holds it (then that file); any other path as given."""
    p = Path(path)
    found = [c for c in (p / "policy.onnx", p / "exported" / "policy.onnx") if p.is_dir() and c.is_file()]
    return str(found[0]) if found else path


class OnnxPolicy:
    """Loads an exported bundle and maps observations to actions with onnxruntime."""

    action_dim: int | None = None
    """Width of the action output (None: not fixed in the graph)."""

    def __init__(self, path: str | Path, intra_op_threads: int = 1):
        import onnxruntime as ort

        path = Path(bundle_file(str(path)))
        if path.is_dir():
            raise ValueError(f"bundle {path} is a folder with no policy.onnx in it (pass the exported file, "
                             "e.g. <run>/exported/policy.onnx, or export one with `ctrl-rl export <run>`)")
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
        width = self.session.get_outputs()[0].shape[-1]
        self.action_dim = width if isinstance(width, int) else None
        # flow policies (FPO) take their initial noise as an input: zeros = the deterministic action
        self.noise_dim = int(inputs["noise"].shape[1]) if "noise" in inputs else 0
        # recurrent policies take their state and return the next one: zeros = an episode's start
        memory = self.metadata.get("memory")
        self.memory_shape: tuple[int, ...] | None = None
        if memory is not None:
            if memory.get("input") not in inputs:
                raise ValueError(f"bundle {path}: its metadata names memory input {memory.get('input')!r}, "
                                 f"the graph has {sorted(inputs)}; re-export it with `ctrl-rl export <run>`")
            self.memory_shape = tuple(int(d) for d in memory["shape"])
            self._memory_io = (memory["input"], memory["output"])
        self.state: np.ndarray | None = None
        """A recurrent policy's state for the batch it last saw (None: zeros at the next call)."""

    @property
    def recurrent(self) -> bool:
        return self.memory_shape is not None

    def reset(self) -> None:
        """Start new episodes: a recurrent policy's next call begins from the zero state."""
        self.state = None

    def __call__(self, obs: np.ndarray, noise: np.ndarray | None = None) -> np.ndarray:
        """Actions for ``obs`` ``[obs_dim]`` or ``[batch, obs_dim]``; a recurrent policy carries its
        state from call to call (:meth:`reset` to start over)."""
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
        if self.memory_shape is None:
            actions = self.session.run(None, feeds)[0]
        else:
            if self.state is None or len(self.state) != len(obs):
                self.state = np.zeros((len(obs), *self.memory_shape), np.float32)
            feeds[self._memory_io[0]] = self.state
            actions, state = self.session.run(["actions", self._memory_io[1]], feeds)
            self.state = state
        return actions[0] if single else actions
