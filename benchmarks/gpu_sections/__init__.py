"""The sections of ``benchmarks/gpu_suite.py``, one module per kind: throughput, learning and
vs_mjlab (with mjlab_child, which runs in mjlab's own environment); common holds what they share."""
