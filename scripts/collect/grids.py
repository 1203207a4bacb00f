"""Shape grids and the dtype table of the collector (pure Python: no torch import).

Shapes follow the NeuSight micro-benchmark data (../shared/data/README.md, method-neusight.md §4.2):
  bmm        B, M, N, K   torch.bmm(randn(B, M, N), randn(B, N, K)); N is the reduction, output B x M x K
  linear     B, M, N, K   nn.Linear(N, K) on a B x M x N input (B = 1 in the data)
  vector ops B, H         rows x hidden (elementwise ops, softmax over H, layer norm over H)
  attention  batch, isl, heads, head_dim: causal SDPA over (batch, heads, isl, head_dim) q, k, v
Every grid draws shapes uniformly inside bins (edges below), like the reference's dims.py, with a fixed seed
so a rerun measures the same shapes.
"""

import random

# The data's OPName of each elementwise op and what the collector runs for it (x, y: B x H tensors).
ELEMENTWISE_OPS = ["add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "relu", "gelu", "tanh"]

FAMILIES = ["bmm", "linear", "elementwise", "softmax", "layernorm", "attention"]
DTYPES = ["fp32", "tf32", "fp16", "bf16", "fp8"]

# Which dtypes the collector measures per family. tf32 is a matmul mode (vector kernels have none); fp8 runs
# as torch._scaled_mm (per-tensor scales, activation quantisation included) on GPUs of compute capability >= 8.9;
# attention is the fused SDPA kernel, which has no fp32 flash path.
SUPPORTED = {
    "bmm": ["fp32", "tf32", "fp16", "bf16"],
    "linear": ["fp32", "tf32", "fp16", "bf16", "fp8"],
    "elementwise": ["fp32", "fp16", "bf16"],
    "softmax": ["fp32", "fp16", "bf16"],
    "layernorm": ["fp32", "fp16", "bf16"],
    "attention": ["fp16", "bf16"],
}

# The data's OPName per family (elementwise: one per op in ELEMENTWISE_OPS).
OPNAME = {"bmm": "bmm", "linear": "linear", "softmax": "softmax", "layernorm": "ln", "attention": "context_attention"}

# Bin edges: (quick, default). A shape dimension is drawn uniformly in (lo, hi] of one bin.
EDGES = {
    "bmm": ([1, 64, 256, 512], [1, 32, 64, 128, 256, 512, 1024]),
    "linear_mn": ([1, 256, 2048, 8192], [1, 64, 256, 512, 1024, 4096, 8192]),
    "linear_k": ([1, 256, 4096, 32768], [1, 64, 256, 512, 1024, 4096, 8192, 16384, 32768, 65536]),
    "vec_b": ([1, 256, 4096, 16384], [1, 64, 256, 1024, 2048, 4096, 8192, 16384]),
    "vec_h": ([1, 512, 1024, 4096], [1, 256, 512, 1024, 2048, 4096]),
    "ln_b": ([4, 1024, 4096, 16384], [4, 256, 1024, 2048, 4096, 8192, 16384]),
    "ln_h": ([256, 1024, 2048, 4096], [256, 512, 1024, 2048, 4096]),
}
ATTENTION = {  # (quick, default) value lists
    "batch": ([1, 4], [1, 2, 4, 8, 16]),
    "isl": ([256, 1024], [128, 256, 512, 1024, 2048, 4096]),
    "heads": ([16], [8, 16, 32]),
    "head_dim": ([64, 128], [64, 128]),
}


def _bins(edges):
    return list(zip(edges[:-1], edges[1:]))


def _draw(rng, lo, hi, multiple=1):
    """A value in (lo, hi], rounded up to `multiple` (never above hi rounded up)."""
    v = rng.randint(lo + 1, hi)
    return -(-v // multiple) * multiple


def shapes(family, quick=False, samples=1, seed=42, multiple=1):
    """The shape grid of one family: a list of dicts of the data's dimension columns.

    samples: shapes drawn per bin combination. multiple: round GEMM dimensions up to this (fp8 needs 16).
    """
    if samples < 1:
        raise ValueError("samples must be >= 1 (got %r)" % (samples,))
    pick = 0 if quick else 1
    rng = random.Random("%s/%d/%d" % (family, seed, multiple))
    out = []
    if family == "bmm":
        b = _bins(EDGES["bmm"][pick])
        for bb in b:
            for bm in b:
                for bn in b:
                    for bk in b:
                        for _ in range(samples):
                            out.append({"B": _draw(rng, *bb), "M": _draw(rng, *bm, multiple),
                                        "N": _draw(rng, *bn, multiple), "K": _draw(rng, *bk, multiple)})
    elif family == "linear":
        mn, k = _bins(EDGES["linear_mn"][pick]), _bins(EDGES["linear_k"][pick])
        for bm in mn:
            for bn in mn:
                for bk in k:
                    for _ in range(samples):
                        out.append({"B": 1, "M": _draw(rng, *bm, multiple), "N": _draw(rng, *bn, multiple),
                                    "K": _draw(rng, *bk, multiple)})
    elif family in ("elementwise", "softmax"):
        for bb in _bins(EDGES["vec_b"][pick]):
            for bh in _bins(EDGES["vec_h"][pick]):
                for _ in range(samples):
                    out.append({"B": _draw(rng, *bb), "H": _draw(rng, *bh)})
    elif family == "layernorm":  # the data's ln grid: multiples of 4, H above 256
        for bb in _bins(EDGES["ln_b"][pick]):
            for bh in _bins(EDGES["ln_h"][pick]):
                for _ in range(samples):
                    out.append({"B": _draw(rng, *bb, 4), "H": _draw(rng, *bh, 4)})
    elif family == "attention":
        a = {key: v[pick] for key, v in ATTENTION.items()}
        for batch in a["batch"]:
            for isl in a["isl"]:
                for heads in a["heads"]:
                    for head_dim in a["head_dim"]:
                        out.append({"batch_size": batch, "isl": isl, "num_heads": heads, "head_dim": head_dim})
    else:
        raise ValueError("unknown family '%s' (known: %s)" % (family, ", ".join(FAMILIES)))
    return out


def element_bytes(dtype):
    return {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}[dtype]


def case_bytes(family, dims, dtype):
    """Bytes of the tensors one case allocates (inputs and output), to skip shapes that do not fit."""
    e = element_bytes(dtype)
    if family == "bmm":
        b, m, n, k = dims["B"], dims["M"], dims["N"], dims["K"]
        return e * b * (m * n + n * k) + max(e, 2) * b * m * k
    if family == "linear":
        t, n, k = dims["B"] * dims["M"], dims["N"], dims["K"]
        return e * (t * n + n * k + k) + max(e, 2) * t * k
    if family == "attention":
        return 4 * e * dims["batch_size"] * dims["num_heads"] * dims["isl"] * dims["head_dim"]
    return 3 * e * dims["B"] * dims["H"]


def cases(families, dtypes, quick=False, samples=1, seed=42, ops=None):
    """Every (family, op, dtype, dims) the collector runs, with an id. Unsupported pairs are returned apart.

    ops: elementwise ops to run (default all of ELEMENTWISE_OPS).
    """
    out, unsupported = [], []
    for family in families:
        if family not in FAMILIES:
            raise ValueError("unknown family '%s' (known: %s)" % (family, ", ".join(FAMILIES)))
        for dtype in dtypes:
            if dtype not in DTYPES:
                raise ValueError("unknown dtype '%s' (known: %s)" % (dtype, ", ".join(DTYPES)))
            if dtype not in SUPPORTED[family]:
                unsupported.append((family, dtype))
                continue
            names = (ops or ELEMENTWISE_OPS) if family == "elementwise" else [OPNAME[family]]
            grid = shapes(family, quick, samples, seed, 16 if dtype == "fp8" else 1)
            for op in names:
                for dims in grid:
                    out.append({"id": "c%05d" % len(out), "family": family, "op": op, "dtype": dtype,
                                "dims": dict(dims)})
    return out, unsupported
