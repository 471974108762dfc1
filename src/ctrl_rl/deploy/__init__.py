"""Deployment: ONNX export with parity check (torch side), runtime (numpy + onnxruntime)."""
