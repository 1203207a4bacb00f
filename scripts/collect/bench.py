"""Stage 1 of the collector: runs the cases on the GPU under torch.profiler and writes Chrome traces + manifest.

Needs PyTorch with CUDA (or ROCm). Every case is allocated, warmed up `warmup` times, then timed `repeat` times
with CUDA events around each run (the data collector's method; the times go into the manifest as event_ms).
Then, under torch.profiler, it runs `profile_runs` more times, each inside record_function("nscase/<id>/<run>");
convert.py maps the kernels back to those runs through the launch calls' correlation ids.
"""

import json
import os
import sys
import time

import grids

CASES_PER_TRACE = 200  # one profiler session per chunk keeps a trace file to tens of MB


def _versions(torch):
    sw = {"torch": torch.__version__, "cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None)}
    try:
        sw["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # no cuDNN in this build
        sw["cudnn"] = None
    sw["fp8_act_quant"] = _fp8_quant_path()
    return sw


def _fp8_quant_path():
    """How the fp8 Linear cases quantise their activations: vLLM's own op, else the same two kernels in Triton, else
    None (the cases are skipped: PyTorch's eager steps are ~10 kernels, not what the gemm_fp8 model prices)."""
    if _vllm_ops() is not None:
        return "vllm.scaled_fp8_quant"
    if _triton_quant() is not None:
        return "triton (ns_fp8_absmax_rows: one atomic max per token row; ns_fp8_quant)"
    return None


def _triton_quant():
    """vLLM's dynamic per-tensor fp8 quantisation (csrc/quantization/fp8/common.cu: segmented_max_reduction, one
    block per token row ending in one atomic max on the single scale, then scaled_fp8_quant_kernel) as two Triton
    kernels, for GPUs without vLLM: (triton, absmax_rows, quant), or None without Triton. Their names start with
    ns_fp8_, which convert.py never takes for a row's GEMM."""
    return (_triton, ns_fp8_absmax_rows, ns_fp8_quant) if _triton is not None else None


try:  # stage 1 only (bench.py is imported by `collect.py run`); Triton resolves a kernel's names in module globals
    import triton as _triton
    import triton.language as tl
except Exception:  # no Triton: fp8 Linear cases need vLLM
    _triton = None

if _triton is not None:
    @_triton.jit
    def ns_fp8_absmax_rows(x_ptr, scale_ptr, n_cols, stride, fp8_max, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)  # row * stride passes 2^31 for activations above 4 GiB in bf16
        m = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
            m = tl.maximum(m, tl.abs(v))
        tl.atomic_max(scale_ptr, tl.max(m, axis=0) / fp8_max)

    @_triton.jit
    def ns_fp8_quant(x_ptr, q_ptr, scale_ptr, n, fp8_max, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: more than 2^31 elements
        mask = offs < n
        s = tl.maximum(tl.load(scale_ptr), 1e-12)
        v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) / s
        v = tl.minimum(tl.maximum(v, -fp8_max), fp8_max)
        tl.store(q_ptr + offs, v.to(q_ptr.dtype.element_ty), mask=mask)


def _vllm_ops():
    """vLLM's custom ops (scaled_fp8_quant) when vLLM is installed, else None."""
    try:
        from vllm import _custom_ops
        return _custom_ops
    except Exception:  # no vLLM (or one built for another torch): the PyTorch steps in _builder
        return None


def _builder(torch, case, dev):
    """A closure running the case once (tensors allocated here, outside the timed ranges)."""
    fam, op, dtype, d = case["family"], case["op"], case["dtype"], case["dims"]
    F = torch.nn.functional
    tdt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
           "fp8": torch.bfloat16}[dtype]
    tf32 = dtype == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32  # fp32 rows are true fp32 (SIMT sgemm), as the data
    torch.backends.cudnn.allow_tf32 = tf32

    def randn(*shape):
        return torch.randn(*shape, device=dev, dtype=tdt)

    if fam == "bmm":
        a, b = randn(d["B"], d["M"], d["N"]), randn(d["B"], d["N"], d["K"])
        return lambda: torch.bmm(a, b)
    if fam == "linear" and dtype == "fp8":
        # Per-tensor scaled e4m3 GEMM after vLLM's dynamic per-tensor activation quantisation, timed with it, as
        # AIConfigurator's fp8 rows (CutlassFP8ScaledMMLinearKernel) and as gemm_fp8 forecasts an fp8 Linear
        # (its act_quant stage, engine/core/tile_model.h): the scale zeroed, an absmax over the activations ending
        # in one atomic max per token row on the single scale (scale = absmax / 448), then the quantising pass.
        # vLLM's own scaled_fp8_quant when vLLM is installed; otherwise the same two kernels in Triton
        # (_triton_quant); run() skips the case when neither is there.
        f8 = torch.float8_e4m3fn
        f8max = float(torch.finfo(f8).max)
        rows = d["B"] * d["M"]
        x = randn(rows, d["N"])
        w = randn(d["K"], d["N"]).to(f8)
        sw = torch.ones((), device=dev, dtype=torch.float32)
        vllm_ops = _vllm_ops()
        if vllm_ops is not None:
            def run():
                xq, sx = vllm_ops.scaled_fp8_quant(x)  # scale None: dynamic per-tensor
                return torch._scaled_mm(xq, w.t(), scale_a=sx.reshape(()), scale_b=sw, out_dtype=torch.bfloat16)
            return run
        triton, absmax_rows, quant = _triton_quant()
        n, block = rows * d["N"], 1024

        def run():
            sx = torch.zeros(1, device=dev, dtype=torch.float32)
            xq = torch.empty((rows, d["N"]), device=dev, dtype=f8)
            absmax_rows[(rows,)](x, sx, d["N"], x.stride(0), f8max, BLOCK=block)
            quant[(triton.cdiv(n, block),)](x, xq, sx, n, f8max, BLOCK=block)
            return torch._scaled_mm(xq, w.t(), scale_a=sx.reshape(()), scale_b=sw, out_dtype=torch.bfloat16)
        return run
    if fam == "linear":
        x, w, bias = randn(d["B"], d["M"], d["N"]), randn(d["K"], d["N"]), randn(d["K"])
        return lambda: F.linear(x, w, bias)
    if fam == "attention":
        shape = (d["batch_size"], d["num_heads"], d["isl"], d["head_dim"])
        q, k, v = randn(*shape), randn(*shape), randn(*shape)
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = randn(d["B"], d["H"])
    if fam == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    if fam == "layernorm":
        ln = torch.nn.LayerNorm(d["H"], device=dev, dtype=tdt)
        return lambda: ln(x)
    y = randn(d["B"], d["H"]).abs_() + 0.5  # positive: pow and div stay finite
    return {
        "add": lambda: x + y, "addu": lambda: x + 1.5, "mul": lambda: x * y, "mulu": lambda: x * 1.5,
        "div": lambda: x / y, "divu": lambda: x / 1.5, "pow": lambda: torch.pow(y, x), "powu": lambda: y ** 1.5,
        "relu": lambda: torch.relu(x), "gelu": lambda: F.gelu(x), "tanh": lambda: torch.tanh(x),
    }[op]


def run(cases, out_dir, warmup, repeat, profile_runs, max_gb, log=sys.stderr):
    """Measures `cases` (grids.cases) and writes out_dir/trace-NNN.json and out_dir/manifest.json."""
    import torch  # stage 1 only: convert.py and grids.py never import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no GPU: torch.cuda.is_available() is False (stage 1 needs a CUDA or ROCm GPU)")
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    cap = torch.cuda.get_device_capability(dev)
    runnable = []
    for c in cases:
        why = None
        if c["dtype"] == "fp8" and (not hasattr(torch, "float8_e4m3fn") or cap < (8, 9)):
            why = "fp8 GEMMs need torch.float8_e4m3fn and compute capability >= 8.9 (this GPU: %d.%d)" % cap
        elif c["dtype"] == "fp8" and c["family"] == "linear" and _fp8_quant_path() is None:
            why = ("fp8 Linear rows need vLLM or Triton for the activation quantisation (vLLM's two fused kernels, "
                   "which gemm_fp8 prices; PyTorch's eager steps would time ~10 kernels instead)")
        elif grids.case_bytes(c["family"], c["dims"], c["dtype"]) > max_gb * 2**30:
            why = "tensors above --max-gb %g" % max_gb
        if why:
            c["skipped"] = why
        else:
            runnable.append(c)
    os.makedirs(out_dir, exist_ok=True)
    manifest = {
        "format": "neusight-collect-manifest", "version": 1, "synthetic": False,
        "device": {"name": torch.cuda.get_device_name(dev), "num_sms": props.multi_processor_count,
                   "capability": "%d.%d" % cap, "memory_gb": round(props.total_memory / 2**30, 1)},
        "software": _versions(torch), "warmup": warmup, "repeat": repeat, "profile_runs": profile_runs,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "traces": [], "cases": cases,
    }
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    done, t0 = 0, time.time()
    for start in range(0, len(runnable), CASES_PER_TRACE):
        chunk = runnable[start:start + CASES_PER_TRACE]
        # Latency as the data's collector measured it: CUDA events around each of `repeat` runs, no profiler
        # attached (its per-op bookkeeping would inflate small kernels).
        for c in chunk:
            try:
                fn = _builder(torch, c, dev)
                for _ in range(warmup):
                    fn()
                ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(repeat)]
                torch.cuda.synchronize()
                for s, e in ev:
                    s.record()
                    fn()
                    e.record()
                torch.cuda.synchronize()
                c["event_ms"] = [s.elapsed_time(e) for s, e in ev]
            except RuntimeError as err:  # out of memory, or a shape/dtype this GPU's libraries refuse
                c["skipped"] = "failed: " + (str(err).strip().splitlines() or ["RuntimeError"])[0]
                print("collect: %s %s %s %s skipped (%s)" % (c["id"], c["op"], c["dtype"], c["dims"], c["skipped"]),
                      file=log)
            fn = None
            torch.cuda.empty_cache()
            done += 1
            if done % 25 == 0 or done == len(runnable):
                print("collect: timed %d/%d cases (%s %s %s), %.0fs" % (done, len(runnable), c["op"], c["dtype"],
                      c["dims"], time.time() - t0), file=log, flush=True)
        # Kernel names, grids and blocks: a few profiled runs per case, each in its own annotated range.
        name = "trace-%03d.json" % (start // CASES_PER_TRACE)
        with torch.profiler.profile(activities=acts) as prof:
            for c in chunk:
                if c.get("skipped"):
                    continue
                try:
                    fn = _builder(torch, c, dev)
                    fn()
                    torch.cuda.synchronize()
                    for i in range(profile_runs):
                        with torch.profiler.record_function("nscase/%s/%d" % (c["id"], i)):
                            fn()
                    torch.cuda.synchronize()
                except RuntimeError as err:
                    c["skipped"] = "failed while profiling: " + (str(err).strip().splitlines() or ["RuntimeError"])[0]
                fn = None
        tmp = os.path.join(out_dir, name + ".tmp")
        prof.export_chrome_trace(tmp)
        os.replace(tmp, os.path.join(out_dir, name))
        manifest["traces"].append(name)
        # After every trace, the manifest of what is done so far: an interrupted run still converts.
        finished = {c["id"] for c in runnable[:start + len(chunk)]}
        _write_manifest(out_dir, dict(manifest, cases=[c for c in cases if c.get("skipped") or c["id"] in finished]))
    skipped = sum(1 for c in cases if c.get("skipped"))
    if skipped:
        print("collect: %d cases skipped (reason in manifest.json)" % skipped, file=log)
    _write_manifest(out_dir, manifest)
    return manifest


def _write_manifest(out_dir, manifest):
    tmp = os.path.join(out_dir, "manifest.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    os.replace(tmp, os.path.join(out_dir, "manifest.json"))
