#!/usr/bin/env python3
"""weights/tc_monotone.py — how often tensor-core GEMM forecasts drop between neighbouring shapes, against the data.

    python3 weights/tc_monotone.py (--folds DIR | --weights DIR) [--exe build/neusight] [--aic DIR] [--work DIR]

On each training GPU's AIConfigurator gemm.csv rows (bf16 and fp8; `weights/training_gpus.sh`'s six, never a GPU of
weights/HELD_OUT), each m its own forecast (so `eval kernels`' order along M within a forecast never spans two m):
  pairs along m: (m, 2m), m in {32, 64, 128}, same n and k;
  pairs along K: neighbouring k of the data's grid, same m in {32, 64, 128, 256} and n;
all with n, k <= 8192 (the data's k is the reduction, n the out-features). A pair drops where time(smaller) >
1.1 x time(larger). Prints the share of dropping pairs per GPU x dtype (pooled over the two axes, then each axis),
measured and forecast. --folds DIR: the forecasts of GPU G come from DIR/<G's data folder> (a leave-one-GPU-out fold
trained without G: weights/train.sh --exclude-gpu G --out DIR/<folder>); --weights DIR: one weights root for all.
The rule that uses it: weights/TC_SPLITK_RULE.md.
"""
import argparse, csv, json, os, subprocess, sys, tempfile

GPUS = ["l40s", "rtx_pro_6000_server", "b200_sxm", "b300_sxm", "gb200", "gb300"]
DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
MS = [32, 64, 128, 256]
LIMIT = 8192
DROP = 1.1


def main():
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--folds")
    g.add_argument("--weights")
    ap.add_argument("--exe", default="build/neusight")
    ap.add_argument("--aic", default="../shared/data/aiconfigurator")
    ap.add_argument("--work")
    ap.add_argument("--json", help="write the per-cell shares here")
    ap.add_argument("--gpus", default=",".join(GPUS), help="comma-separated data folders (default: the six)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="tc_monotone_")
    hdr = "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency".split(",")
    out = {}
    print("share of neighbouring pairs that drop (> 1.1x), measured / forecast, %: pooled | along m | along K")
    for gpu in a.gpus.split(","):
        if gpu not in GPUS:
            sys.exit("tc_monotone.py: --gpus: '%s' is not one of the training GPUs' folders (%s)" % (gpu, ", ".join(GPUS)))
        rows = [r for r in csv.DictReader(open(os.path.join(a.aic, gpu, "gemm.csv")))
                if r["gemm_dtype"] in DTYPES and int(r["m"]) in MS and int(r["n"]) <= LIMIT and int(r["k"]) <= LIMIT]
        t = {}  # (dtype, m, n, k) -> (measured, forecast) ms
        weights = os.path.join(a.folds, gpu) if a.folds else a.weights
        for m in MS:
            sel = [r for r in rows if int(r["m"]) == m]
            p = os.path.join(work, gpu, "m%d" % m, "gemm.csv")
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(",".join(hdr) + "\n")
                for r in sel:
                    f.write(",".join(r[c] for c in hdr) + "\n")
            res = subprocess.run([a.exe, "eval", "kernels", p, "--weights", weights, "--format", "json"],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                sys.exit("tc_monotone.py: %s failed: %s" % (p, res.stderr.strip()))
            for r in json.loads(res.stdout)["rows"]:
                s = sel[int(r["where"].rsplit(":", 1)[1]) - 2]
                t[(s["gemm_dtype"], m, int(s["n"]), int(s["k"]))] = (r["measured_ms"], r["predicted_ms"])
        for dt, short in DTYPES.items():
            pairs = {"m": [], "K": []}
            for (d, m, n, k) in t:
                if d != dt:
                    continue
                if m * 2 in MS and (d, 2 * m, n, k) in t:
                    pairs["m"].append(((d, m, n, k), (d, 2 * m, n, k)))
            ks = {}
            for (d, m, n, k) in t:
                if d == dt:
                    ks.setdefault((m, n), []).append(k)
            for (m, n), kl in ks.items():
                kl.sort()
                for k0, k1 in zip(kl, kl[1:]):
                    pairs["K"].append(((dt, m, n, k0), (dt, m, n, k1)))
            cell = {}
            for axis in ("all", "m", "K"):
                ps = pairs["m"] + pairs["K"] if axis == "all" else pairs[axis]
                meas = sum(t[a0][0] > DROP * t[a1][0] for a0, a1 in ps)
                fc = sum(t[a0][1] > DROP * t[a1][1] for a0, a1 in ps)
                cell[axis] = (len(ps), 100.0 * meas / len(ps), 100.0 * fc / len(ps))
            out["%s %s" % (gpu, short)] = cell
            print("%-20s %-4s pairs %4d  %5.1f / %5.1f | %5.1f / %5.1f | %5.1f / %5.1f" % (
                gpu, short, cell["all"][0], cell["all"][1], cell["all"][2], cell["m"][1], cell["m"][2],
                cell["K"][1], cell["K"][2]))
    fc = [c["all"][2] for c in out.values()]
    over = [k for k, c in out.items() if c["all"][2] > c["all"][1] + 2.0]
    print("mean forecast share %.2f %%; cells above measured + 2 points: %s" % (
        sum(fc) / len(fc), ", ".join(over) if over else "none"))
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
