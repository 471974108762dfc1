"""Splice an exported base policy (``policy.onnx``) in front of a residual head, in ONNX.

A residual policy whose frozen base is an ONNX file cannot be traced by torch (the base runs in
onnxruntime). Its bundle is built at the graph level instead: the head
``(obs, base_action) -> actions`` is exported from torch, the base graph gets a pass-through
of ``obs`` (and, for a flow base, zero initial noise made in the graph: the deterministic base
action, as in training), and :func:`onnx.compose.merge_models` wires ``base.actions`` to
``head.base_action``. The result has the one ``obs`` input and ``actions`` output every bundle has.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _with_obs_passthrough(base: onnx.ModelProto) -> onnx.ModelProto:
    """The base graph with an ``obs_pass`` output (= ``obs``) and any ``noise`` input replaced by zeros."""
    m = onnx.ModelProto()
    m.CopyFrom(base)
    del m.metadata_props[:]
    g = m.graph
    inputs = {i.name: i for i in g.input}
    if "obs" not in inputs or len(g.output) != 1:
        raise ValueError("an ONNX base must have an 'obs' input and one output (a ctrl_rl policy bundle)")
    new_nodes = [helper.make_node("Identity", ["obs"], ["obs_pass"])]
    if "noise" in inputs:
        noise_dim = inputs["noise"].type.tensor_type.shape.dim[1].dim_value
        g.initializer.extend([numpy_helper.from_array(np.array([0], np.int64), "noise_start"),
                              numpy_helper.from_array(np.array([1], np.int64), "noise_end"),
                              numpy_helper.from_array(np.array([noise_dim], np.int64), "noise_width")])
        new_nodes += [
            helper.make_node("Shape", ["obs"], ["obs_shape"]),
            helper.make_node("Slice", ["obs_shape", "noise_start", "noise_end"], ["batch"]),
            helper.make_node("Concat", ["batch", "noise_width"], ["noise_shape"], axis=0),
            helper.make_node("ConstantOfShape", ["noise_shape"], ["noise"],
                             value=helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])),
        ]
        g.input.remove(inputs["noise"])
    nodes = list(g.node)
    del g.node[:]
    g.node.extend(new_nodes + nodes)
    obs_type = inputs["obs"].type
    g.output.append(helper.make_value_info("obs_pass", obs_type))
    return m


def compose_base_and_head(base: onnx.ModelProto, head: onnx.ModelProto) -> onnx.ModelProto:
    """``obs -> base -> head(obs, base_action) -> actions`` as one model (inputs ``obs``, output ``actions``)."""
    base = _with_obs_passthrough(base)
    head_opset = {o.domain: o.version for o in head.opset_import}
    base_opset = {o.domain: o.version for o in base.opset_import}
    if base_opset.get("", 0) != head_opset.get("", 0):
        from onnx import version_converter

        base = version_converter.convert_version(base, head_opset[""])
    base.ir_version = head.ir_version
    del base.opset_import[:]
    base.opset_import.extend(head.opset_import)
    out_name = base.graph.output[0].name
    merged = onnx.compose.merge_models(base, head, io_map=[(out_name, "base_action"), ("obs_pass", "obs")],
                                       prefix1="base/", prefix2="residual/")
    rename = {"base/obs": "obs", "residual/actions": "actions"}
    g = merged.graph
    for node in g.node:
        node.input[:] = [rename.get(n, n) for n in node.input]
        node.output[:] = [rename.get(n, n) for n in node.output]
    for v in list(g.input) + list(g.output):
        v.name = rename.get(v.name, v.name)
    return merged
