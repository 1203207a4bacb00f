#!/usr/bin/env python3
"""tests/bench/decode_batch_drops.py — the decode attention op along the batch (issue 13, 2026-11-30 decodeunsplit).

`predict --model M --gpu G --mode decode --dtype bf16 --launch graph --batch B --context C --format json`, the
decode_attention op's ms (all layers), for Llama-3-8B, Qwen3-8B and Llama-3-70B --tp 4 on H100, H200, A100-SXM4-80GB,
L40S and B200, contexts 512 / 1024 / 2048 / 4096 / 8192, batch 1…64 (4,800 forecasts, about 10 min on two cores).
A drop: the same context, B → B+1, the op's ms falls by more than 1 %. Each drop is classified by the library kernel
the tile rule gave the two launches (tile blocks, split = blocks / (B · KV heads), waves = ⌈blocks / SMs⌉):
  unsplit same-waves   split 1 at both, the same number of waves
  unsplit cross-wave   split 1 at both, B+1's grid one wave more
  split same-split     the same split ≥ 2 at both
  split switch         the splits differ
Prints the counts per class (and per model × GPU), the worst ratio of each class; writes OUTDIR/ops.jsonl (resumable)
and OUTDIR/drops.json.
Usage, from the repository root:  python3 tests/bench/decode_batch_drops.py [build/neusight] [OUTDIR]"""
import collections, itertools, json, math, os, re, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/neusight"
OUTDIR = sys.argv[2] if len(sys.argv) > 2 else "decode_batch_drops"
os.makedirs(OUTDIR, exist_ok=True)
OPS = os.path.join(OUTDIR, "ops.jsonl")
MODELS = [("llama3_8b", []), ("qwen3_8b", []), ("llama3_70b_tp4", ["--tp", "4"])]
GPUS = ["h100", "h200", "a100_sxm4_80gb", "l40s", "b200"]
CONTEXTS = [512, 1024, 2048, 4096, 8192]
BATCHES = range(1, 65)
CLASSES = ["unsplit same-waves", "unsplit cross-wave", "split same-split", "split switch"]
DROP = 0.99  # B+1's ms below 99 % of B's


def preset(model):
    return model.split("_tp")[0]


def run(job):
    (model, extra), gpu, context, batch = job
    cmd = ["nice", BIN, "predict", "--model", preset(model), "--gpu", gpu, *extra, "--mode", "decode", "--dtype", "bf16",
           "--launch", "graph", "--batch", str(batch), "--context", str(context), "--format", "json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr[-400:]}")
    d = json.loads(p.stdout)
    att = [o for o in d["ops"] if o["op"] == "decode_attention"]
    if len(att) != 1:
        raise SystemExit(f"{' '.join(cmd)}: {len(att)} decode_attention ops")
    o = att[0]
    return dict(model=model, gpu=gpu, context=context, batch=batch, gpu_file=d["gpu_file"], ms=o["ms"],
                blocks=o["tile"]["blocks"], kv_heads=o["dims"]["kv_heads"], kernel=o["tile"]["library_kernel"])


def num_sm(gpu_file):
    for line in open(gpu_file):
        m = re.match(r"\s*num_sm\s*=\s*(\d+)", line)
        if m:
            return int(m.group(1))
    raise SystemExit(f"{gpu_file}: no num_sm")


done = set()
if os.path.exists(OPS):
    for line in open(OPS):
        r = json.loads(line)
        done.add((r["model"], r["gpu"], r["context"], r["batch"]))
jobs = [j for j in itertools.product(MODELS, GPUS, CONTEXTS, BATCHES) if (j[0][0], j[1], j[2], j[3]) not in done]
print(len(jobs), "forecasts to run", flush=True)
with ThreadPoolExecutor(2) as ex, open(OPS, "a") as f:
    for r in ex.map(run, jobs):
        f.write(json.dumps(r) + "\n")

rows = {}
for line in open(OPS):
    r = json.loads(line)
    rows[(r["model"], r["gpu"], r["context"], r["batch"])] = r
sms = {}
drops = []
count = collections.Counter()
by = collections.defaultdict(collections.Counter)
worst = {}
for model, gpu, context in itertools.product([m for m, _ in MODELS], GPUS, CONTEXTS):
    for b in BATCHES:
        a, c = rows.get((model, gpu, context, b)), rows.get((model, gpu, context, b + 1))
        if not a or not c or not c["ms"] < DROP * a["ms"]:
            continue
        n = sms.setdefault(a["gpu_file"], num_sm(a["gpu_file"]))
        sa, sc = a["blocks"] / (b * a["kv_heads"]), c["blocks"] / ((b + 1) * c["kv_heads"])
        wa, wc = math.ceil(a["blocks"] / n), math.ceil(c["blocks"] / n)
        if sa != sc:
            cls = "split switch"
        elif sa == 1:
            cls = "unsplit same-waves" if wa == wc else "unsplit cross-wave"
        else:
            cls = "split same-split"
        ratio = c["ms"] / a["ms"]
        d = dict(cls=cls, model=model, gpu=gpu, context=context, batch=b, ms=[a["ms"], c["ms"]], ratio=ratio,
                 blocks=[a["blocks"], c["blocks"]], split=[sa, sc], waves=[wa, wc], sms=n)
        drops.append(d)
        count[cls] += 1
        by[(model, gpu)][cls] += 1
        if cls not in worst or ratio < worst[cls]["ratio"]:
            worst[cls] = d
json.dump(dict(counts=count, drops=drops), open(os.path.join(OUTDIR, "drops.json"), "w"), indent=1)
print(f"drops (> {100 * (1 - DROP):.0f} % cheaper with one more sequence), {len(rows)} forecasts:", sum(count.values()))
for cls in CLASSES:
    w = worst.get(cls)
    desc = (f"  worst {w['model']} {w['gpu']} C{w['context']} b{w['batch']}→{w['batch'] + 1} ×{w['ratio']:.3f} "
            f"(blocks {w['blocks'][0]:.0f}→{w['blocks'][1]:.0f} on {w['sms']} SMs, split {w['split'][0]:g}→"
            f"{w['split'][1]:g})" if w else "")
    print(f"  {cls:20s} {count[cls]:4d}{desc}")
print("per model and GPU (" + " / ".join(CLASSES) + "):")
for model, gpu in itertools.product([m for m, _ in MODELS], GPUS):
    print(f"  {model:15s} {gpu:15s} " + " / ".join(str(by[(model, gpu)][c]) for c in CLASSES))
