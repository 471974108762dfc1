"""ctrl_rl: continuous-control RL for robots, from batched simulation to ONNX deployment."""

__version__ = "0.1.0"
