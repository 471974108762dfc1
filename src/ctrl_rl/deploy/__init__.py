"""The robot side of deployment, torch-free (numpy, onnxruntime, cyclonedds): the ONNX runtime, the deploy
node with its safety state machine and parameters, the transports, and the MuJoCo sim2sim bridge.
ONNX export (torch side) is ``ctrl_rl.export``."""
