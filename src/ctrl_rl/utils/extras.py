"""Optional dependencies: which ``ctrl-rl[extra]`` installs a module, so a missing one is one line that
names the install, never a traceback (the CLIs catch ``ModuleNotFoundError`` through :func:`missing`)."""

from __future__ import annotations

EXTRAS = {
    "mujoco": "mujoco", "yaml": "mujoco", "mujoco_warp": "mjwarp", "warp": "mjwarp", "gymnasium": "gymnasium",
    "cyclonedds": "deploy", "onnxruntime": "deploy", "av": "video", "rsl_rl": "bench", "stable_baselines3": "bench",
    "torch": "train", "hydra": "train", "omegaconf": "train", "tensorboard": "train", "matplotlib": "train",
    "onnx": "train", "onnxscript": "train", "h5py": "train", "minari": "train",
}
"""Top-level module -> the extra of ``pyproject.toml`` that installs it."""


def missing(exc: BaseException, what: str = "this") -> str | None:
    """``'sim=mujoco needs mujoco: pip install "ctrl-rl[mujoco]"'`` for a ``ModuleNotFoundError`` of a
    module an extra installs; ``None`` for anything else (a real bug: let it raise)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    module = exc.name.split(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return None
    return f'{what} needs {module}, which is not installed: pip install "ctrl-rl[{extra}]"'
