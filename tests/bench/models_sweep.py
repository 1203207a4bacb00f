#!/usr/bin/env python3
"""tests/bench/models_sweep.py — issue 12's sweep: every Llama-family, MoE and DeepSeek preset x train, inference,
prefill, decode x fp32, bf16 x one GPU and 17 layouts (tp, tp4 + sequence parallel, pp, dp, tp x pp x dp, ep, tp x ep,
recompute, distributed optimizer, eager / sdpa attention, grouped experts, tp 8, interleaved, eager kernels, ...)
through `predict`, plus `search` (train and inference, enough GPUs to fit) and `serve` (static tp 1 / tp 8, Poisson
rate), about 2,200 runs. Each is checked (exit status, finite positive times and FLOPs, memory parts summing to
memory_gb, search ranking a layout) and the failures and warnings are grouped with an example each.
Usage, from the repository root:  python3 tests/bench/models_sweep.py [build/neusight] [results.jsonl]
(the fast CI subset is tests/cli/test_presets_matrix_cli.cpp; decode uses --seq 1 --context 256)"""
import json, math, os, subprocess, sys, re, collections, concurrent.futures as cf
B = sys.argv[1] if len(sys.argv) > 1 else "build/neusight"
PRESETS = ["llama2_7b","llama2_13b","llama2_70b","llama3_8b","llama3_70b","llama3_405b","llama32_1b","llama32_3b",
  "mistral_7b","mixtral_8x7b","mixtral_8x22b","qwen25_7b","qwen25_72b","qwen3_8b","qwen3_32b","qwen3_30b_a3b",
  "qwen15_moe_a27b","deepseek_v2_lite","deepseek_v2","deepseek_v3"]
MOE = {"mixtral_8x7b","mixtral_8x22b","qwen3_30b_a3b","qwen15_moe_a27b","deepseek_v2_lite","deepseek_v2","deepseek_v3"}
MODES = [("train",[]),("inference",[]),("prefill",[]),("decode",["--context","256","--seq","1"])]
DTYPES = ["fp32","bf16"]
GPUS = {"llama2_70b":32,"llama3_70b":32,"qwen25_72b":32,"mixtral_8x7b":16,"mixtral_8x22b":64,"deepseek_v2":128,"llama3_405b":128,"deepseek_v3":256}
LAYOUTS = {"single":[], "tp2":["--tp","2"], "tp4sp":["--tp","4","--sequence-parallel"], "pp2":["--pp","2","--microbatches","2"],
  "dp2":["--dp","2"], "tp2pp2dp2":["--tp","2","--pp","2","--dp","2","--microbatches","2"],
  "ep2":["--dp","2","--ep","2"], "tp2ep4":["--tp","2","--dp","4","--ep","4","--sequence-parallel"],
  "recompute":["--tp","2","--recompute","full"], "distopt":["--dp","4","--distributed-optimizer"],
  "eager":["--attention","eager"], "sdpa":["--attention","sdpa"], "grouped":["--experts","grouped"], "tp8":["--tp","8"],
  "interleaved":["--pp","2","--microbatches","4","--schedule","interleaved"], "kernels_eager":["--tp","2","--kernels","eager"],
  "pp2ep2grouped":["--pp","2","--dp","2","--ep","2","--experts","grouped","--microbatches","2"], "selective":["--tp","2","--recompute","selective","--sequence-parallel"],
  "recompute1":["--recompute","full"]}
def run(args):
    p = subprocess.run([B]+args+["--format","json"], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr
def fin(x): return isinstance(x,(int,float)) and math.isfinite(x)
def check_predict(d):
    bad = []
    for k in ["latency_ms","memory_gb","flops"]:
        v = d.get(k)
        if not fin(v) or v <= 0: bad.append(f"{k}={v}")
    for k in ["forward_ms","backward_ms","optimizer_ms","grad_accumulate_ms","state_gb"]:
        v = d.get(k)
        if v is not None and (not fin(v) or v < 0): bad.append(f"{k}={v}")
    m = d.get("memory")
    if not isinstance(m, dict): bad.append("no memory table"); return bad
    parts = ["state_gb","activations_gb","temporary_gb","workspace_gb","kv_cache_gb"]
    s = 0
    for p in parts:
        v = m.get(p)
        if v is None: bad.append(f"memory.{p} missing"); continue
        if not fin(v) or v < 0: bad.append(f"memory.{p}={v}")
        else: s += v
    if fin(d.get("memory_gb")) and abs(s - d["memory_gb"]) > 1e-6*max(1,d["memory_gb"]): bad.append(f"memory parts {s} != memory_gb {d['memory_gb']}")
    for sub, tot in [("state","state_gb"),("workspace","workspace_gb")]:
        if isinstance(m.get(sub), dict):
            ss = sum(m[sub].values())
            if abs(ss - m[tot]) > 1e-6*max(1,m[tot]): bad.append(f"memory.{sub} parts {ss} != {tot} {m[tot]}")
    if "fits" not in d: bad.append("no fits")
    if d.get("parallel"):
        par = d["parallel"]
        for dev in par.get("devices", []):
            for k,v in dev.items():
                if isinstance(v,(int,float)) and (not fin(v) or v < 0): bad.append(f"device {dev.get('stage')} {k}={v}")
    for op in d.get("ops", []):
        v = op.get("ms")
        if not fin(v) or v < 0: bad.append(f"op {op['name']} ms={v}"); break
    return bad
def norm(w): return re.sub(r"\d+(\.\d+)?", "#", w)
jobs = []
for m in PRESETS:
    for mode, extra in MODES:
        for dt in DTYPES:
            for lname, la in LAYOUTS.items():
                if lname in ("ep2","tp2ep4","grouped","pp2ep2grouped") and m not in MOE: continue
                if mode != "train" and lname in ("distopt","recompute","selective","interleaved","recompute1"): continue
                jobs.append(("predict", m, mode, dt, lname, ["predict","--model",m,"--gpu","h100","--batch","8"]+([] if mode=="decode" else ["--seq","128"])+["--mode",mode,"--dtype",dt]+extra+la))
    for mode in ["train","inference"]:
        for dt in DTYPES:
            g = GPUS.get(m, 8)
            jobs.append(("search", m, mode, dt, f"gpus{g}", ["search","--model",m,"--gpu","h100","--gpus",str(g),"--batch",str(max(16,g)),"--seq","128","--mode",mode,"--dtype",dt,"--distributed-optimizer"]))
    jobs.append(("search", m, "train", "bf16", "gpus1", ["search","--model",m,"--gpu","h100","--gpus","1","--batch","8","--seq","128","--dtype","bf16","--all"]))
    for dt in DTYPES:
        jobs.append(("serve", m, "serve", dt, "tp1", ["serve","--model",m,"--gpu","h100","--batch","4","--input-len","128","--output-len","16","--dtype",dt]))
        jobs.append(("serve", m, "serve", dt, "tp8", ["serve","--model",m,"--gpu","h100","--tp","8","--batch","4","--input-len","128","--output-len","16","--dtype",dt]))
        jobs.append(("serve", m, "serve", dt, "rate", ["serve","--model",m,"--gpu","h100","--tp","8","--rate","2","--requests","50","--input-len","128","--output-len","16","--dtype",dt]))
rec = open(sys.argv[2] if len(sys.argv) > 2 else os.devnull, "w")
# Refusals by design (a layout that cannot exist), counted apart from failures.
BY_DESIGN = [r"is not divisible by tp", r"mode \"decode\" has one new token per sequence",
  r"KV-cache blocks of .* but only 0 fit"]
refused = collections.Counter()
fails = []; warns = collections.Counter(); warn_ex = {}
def do(job):
    kind, m, mode, dt, lname, args = job
    rc, out, err = run(args)
    return job, rc, out, err
with cf.ThreadPoolExecutor(2) as ex:
    for job, rc, out, err in ex.map(do, jobs):
        kind, m, mode, dt, lname, args = job
        tag = f"{kind} {m} {mode} {dt} {lname}"
        if rc != 0 and any(re.search(p, err) for p in BY_DESIGN):
            refused[norm(err.strip().splitlines()[0])[:160]] += 1
            continue
        if rc != 0:
            fails.append((tag, "rc=%d: %s" % (rc, err.strip().splitlines()[0] if err.strip() else "")))
            continue
        try: d = json.loads(out)
        except Exception as e: fails.append((tag, f"bad json {e}")); continue
        dd = {k:v for k,v in d.items() if k != "ops"}
        rec.write(json.dumps({"tag":tag,"kind":kind,"m":m,"mode":mode,"dt":dt,"layout":lname,"d":dd})+"\n")
        if kind == "predict": bad = check_predict(d)
        elif kind == "search":
            rows = d.get("layouts") or d.get("rows") or d.get("results")
            bad = [] if rows else ["search ranked nothing: keys %s" % list(d.keys())]
            if rows:
                for r in rows:
                    for k,v in r.items():
                        if isinstance(v,float) and (not math.isfinite(v) or v < 0): bad.append(f"row {k}={v}")
        else:
            bad = []
            def walk(x, path):
                if isinstance(x, dict):
                    for k,v in x.items(): walk(v, path+"."+k)
                elif isinstance(x, list):
                    for i,v in enumerate(x[:50]): walk(v, path+f"[{i}]")
                elif isinstance(x, float) and (not math.isfinite(x) or x < 0):
                    bad.append(f"{path}={x}")  # kv_budget_gb too: 0 (and a warning) when the weights alone overflow
            walk(d, "")
        if bad: fails.append((tag, "; ".join(bad[:4])))
        for w in (d.get("warnings") or []):
            if "out of distribution" in w: continue
            k = norm(w); warns[k] += 1; warn_ex.setdefault(k, tag + " :: " + w)
print(f"{len(jobs)} runs, {sum(refused.values())} refused by design, {len(fails)} failed")
for e, n in refused.most_common(): print(f"  refused [{n}] {e}")
byerr = collections.defaultdict(list)
for tag, e in fails: byerr[norm(e)[:200]].append(tag)
for e, tags in sorted(byerr.items(), key=lambda x: -len(x[1])):
    print(f"\n[{len(tags)}] {e}\n   e.g. " + "\n        ".join(tags[:6]))
print("\n==== warnings (normalized) ====")
for k, n in warns.most_common():
    print(f"[{n}] {warn_ex[k][:400]}")
