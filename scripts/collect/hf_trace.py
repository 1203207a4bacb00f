"""Record a PyTorch-profiler Chrome trace of one training, inference or decode step of a HuggingFace model.

The model is built from its config with random weights (nothing is downloaded), optionally cut to a few layers,
run for `--warmup` untimed steps, then `--steps` steps are profiled (CPU + CUDA activities, input shapes
recorded). The trace is what `neusight scale --trace` reads (kernels with grid/block, the launching aten op with
its input shapes, backward ops linked to their forward op by sequence number, the optimizer step), and what
`--calibrate` reads as a measurement of the GPU it ran on.

    python3 scripts/collect/hf_trace.py --model gpt2 --layers 2 --mode train --batch 4 --seq 512 --out gpt2.json
    python3 scripts/collect/hf_trace.py --model path/to/config.json --dtype bf16 --mode inference --out m.json
    python3 scripts/collect/hf_trace.py --model llama --dtype bf16 --mode decode --batch 8 --seq 1024 --out d.json

`--mode decode` (causal models): one new token per sequence against a KV cache of `--seq` tokens (HF's cache,
filled by one prefill before anything is timed; each step's new entry is cropped off again, so every step sees the
same context).

The step time measured with CUDA events (each of `--timed` unprofiled steps after the warm-up, and their mean) and
the peak memory of those steps (torch.cuda.max_memory_allocated, GB) go into the trace's metadata key "neusight", a
sidecar OUT.meta.json and stderr.
Needs PyTorch with a GPU and `transformers` (any 4.x or 5.x).
"""

import argparse
import json
import os
import sys

# Built-in configs: HF's own defaults of each model type (the base size), llama = Llama 3.2 1B: its config.json is
# tests/fixtures/hf/llama32_1b/config.json in the source tree, installed beside this script as configs/llama32_1b.json
# (CMakeLists.txt), where an installation (which has no tests/) finds it.
HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA_CONFIGS = [os.path.join(HERE, "configs", "llama32_1b.json"),
                 os.path.join(HERE, "..", "..", "tests", "fixtures", "hf", "llama32_1b", "config.json")]
LLAMA_CONFIG = next((p for p in LLAMA_CONFIGS if os.path.isfile(p)), LLAMA_CONFIGS[0])
PRESETS = {"gpt2": "gpt2", "bert": "bert", "opt": "opt", "llama": LLAMA_CONFIG}
CAUSAL = {"gpt2", "opt", "llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "gpt_neox"}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True,
                   help="gpt2 | bert | opt | llama (built-in configs) or a HuggingFace config.json")
    p.add_argument("--layers", type=int, help="keep only this many transformer layers")
    p.add_argument("--mode", choices=["train", "inference", "decode"], default="train",
                   help="train: forward, backward, AdamW step; inference: forward under no_grad; decode: one token "
                        "per sequence against a KV cache of --seq tokens, under no_grad (default train)")
    p.add_argument("--dtype", choices=["fp32", "tf32", "fp16", "bf16"], default="fp32",
                   help="parameter and activation dtype; tf32 = fp32 with TF32 matmuls (default fp32)")
    p.add_argument("--attn", choices=["eager", "sdpa"], default="sdpa",
                   help="attention implementation (HF's attn_implementation; default sdpa, HF's own default)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=512, help="sequence length; decode: the KV cache's length")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--timed", type=int, default=10, help="unprofiled steps timed with CUDA events (default 10)")
    p.add_argument("--steps", type=int, default=1, help="profiled steps (default 1)")
    p.add_argument("--out", required=True, help="Chrome-trace JSON to write")
    a = p.parse_args(argv)
    for k in ("batch", "seq", "steps"):
        if getattr(a, k) < 1:
            p.error("--%s must be at least 1" % k)
    if a.layers is not None and a.layers < 1:
        p.error("--layers must be at least 1")
    if a.warmup < 0 or a.timed < 0:
        p.error("--warmup and --timed must be at least 0")
    return a


def load_config(transformers, spec, layers):
    path = PRESETS.get(spec, spec)
    if spec == "llama" and not os.path.isfile(path):
        raise SystemExit("hf_trace.py: the built-in llama config is missing (looked for %s); pass a config.json"
                         % " and ".join(LLAMA_CONFIGS))
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        if "model_type" not in d:
            raise SystemExit("hf_trace.py: %s: no \"model_type\" key (is it a HuggingFace config.json?)" % path)
        mt = d.pop("model_type")
        for k in ("architectures", "transformers_version", "torch_dtype", "dtype"):
            d.pop(k, None)
        cfg = transformers.AutoConfig.for_model(mt, **d)
    elif os.sep in spec or spec.endswith(".json"):
        raise SystemExit("hf_trace.py: %s: no such file" % spec)
    else:
        try:
            cfg = transformers.AutoConfig.for_model(path)
        except ValueError as e:
            raise SystemExit("hf_trace.py: unknown model %r (%s); built-in: %s" % (spec, e, ", ".join(PRESETS)))
    if layers is not None:
        cfg.num_hidden_layers = layers  # attribute_map turns this into n_layer etc.
    return cfg


def build(torch, transformers, cfg, a, dev):
    mt = cfg.model_type
    auto = transformers.AutoModelForCausalLM if mt in CAUSAL else transformers.AutoModelForMaskedLM
    try:
        model = auto.from_config(cfg, attn_implementation=a.attn)
    except (TypeError, ValueError):  # an old transformers without attn_implementation
        model = auto.from_config(cfg)
    dt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    return model.to(device=dev, dtype=dt)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    import transformers

    if not torch.cuda.is_available():
        raise SystemExit("hf_trace.py: no GPU (torch.cuda.is_available() is False)")
    torch.backends.cuda.matmul.allow_tf32 = a.dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = a.dtype == "tf32"
    dev = torch.device("cuda")
    cfg = load_config(transformers, a.model, a.layers)
    model = build(torch, transformers, cfg, a, dev)
    vocab = cfg.vocab_size
    ids = torch.randint(0, vocab, (a.batch, a.seq), device=dev)
    train, decode = a.mode == "train", a.mode == "decode"
    if decode and cfg.model_type not in CAUSAL:
        raise SystemExit("hf_trace.py: --mode decode needs a causal model (%s is not one)" % cfg.model_type)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5) if train else None
    if train:
        model.train()
    else:
        model.eval()

    if decode:  # the context's KV cache, made once, outside every timed or profiled step
        with torch.no_grad():
            cache = model(input_ids=ids, use_cache=True).past_key_values
        if not hasattr(cache, "crop"):  # a legacy tuple cache (old transformers) cannot be cut back to the context
            raise SystemExit("hf_trace.py: --mode decode needs transformers' Cache objects (got %s)" % type(cache).__name__)
        tok = torch.randint(0, vocab, (a.batch, 1), device=dev)

    def step():
        if train:
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        elif decode:
            with torch.no_grad():
                model(input_ids=tok, past_key_values=cache, use_cache=True)
            cache.crop(-1)  # drop the new entry: the next step decodes the same position against the same context
        else:
            with torch.no_grad():
                model(input_ids=ids)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(dev)  # the peak of a steady-state step, not of the first (allocator warm-up)
    timed = []
    for _ in range(a.timed):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step()
        e.record()
        torch.cuda.synchronize()
        timed.append(s.elapsed_time(e))
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    params = sum(p.numel() for p in model.parameters())
    meta = {"format": "neusight-trace-meta", "version": 1, "model_type": cfg.model_type, "layers": cfg.num_hidden_layers,
            "mode": a.mode, "dtype": a.dtype, "attn": a.attn, "batch": a.batch, "seq": a.seq, "steps": a.steps,
            "params": params, "device": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
            "step_ms_events": timed, "step_ms_mean": (sum(timed) / len(timed)) if timed else None,
            # torch.cuda.max_memory_allocated over the timed steps: what `neusight predict`'s memory_gb forecasts
            "max_memory_allocated_gb": torch.cuda.max_memory_allocated(dev) / 1e9 if a.timed else None}
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
        try:  # metadata belongs to the running session: added before it stops (top-level key "neusight")
            prof.add_metadata_json("neusight", json.dumps(meta))
        except AttributeError:  # older torch: the sidecar below still has it
            pass
    tmp = a.out + ".tmp"
    prof.export_chrome_trace(tmp)
    os.replace(tmp, a.out)
    with open(a.out + ".meta.json", "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    print("hf_trace.py: %s %d layers %s %s batch %d seq %d: %.3f ms/step (mean of %d), peak %.3f GB, %d params -> %s" %
          (cfg.model_type, cfg.num_hidden_layers, a.mode, a.dtype, a.batch, a.seq, meta["step_ms_mean"] or 0,
           len(timed), meta["max_memory_allocated_gb"] or 0, params, a.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
