"""Export (torch side): a trained policy to ONNX with a parity check against torch
(``onnx_policy``), and the composition of a base and a residual head into one graph (``compose``).
The robot side that runs the result without torch is ``ctrl_rl.deploy``."""
