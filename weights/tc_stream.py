#!/usr/bin/env python3
"""weights/tc_stream.py — weight streaming beyond the data's waves: criterion 5 of weights/WEIGHT_STREAM_RULE.md.

    python3 weights/tc_stream.py [--exe build/neusight] [--weights DIR]

Forecasts (no measurement) of bf16 GEMMs m 1 and 16 × k 4096 (the data's k: the reduction) × n 65536 … 200704 (the
data's n: out-features; 65536 is the data's largest, 200704 a Mixtral-8x7B grouped gate-up's 7 × 28672) on the six
tensor-core training GPUs' spec files, as TB/s of weights read (2 n k bytes / forecast). The criterion: at every n the
bandwidth is at least 0.9 × that at n 65536. Held-out GPUs are not swept.
"""
import argparse, json, os, subprocess, sys, tempfile

DEVS = ["NVIDIA L40S", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA B200", "NVIDIA B300 SXM6 AC",
        "NVIDIA GB200", "NVIDIA GB300"]
NS = [65536, 86016, 114688, 143360, 200704]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", default="build/neusight")
    ap.add_argument("--weights")
    a = ap.parse_args()
    rows = ["framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency"]
    for d in DEVS:
        for m in (1, 16):
            rows += [f"VLLM,0,{d},gemm,sweep,bfloat16,{m},{n},4096,1.0" for n in NS]
    with tempfile.TemporaryDirectory() as t:
        path = os.path.join(t, "stream.csv")
        open(path, "w").write("\n".join(rows) + "\n")
        args = [a.exe, "eval", "kernels", path, "--format", "json"] + (["--weights", a.weights] if a.weights else [])
        j = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
    p = {}
    for r in j["rows"]:
        x = rows[int(r["where"].rsplit(":", 1)[1]) - 1].split(",")
        p[(x[2], int(x[6]), int(x[7]))] = r["predicted_ms"]
    worst = float("inf")
    for d in DEVS:
        for m in (1, 16):
            bw = [2 * n * 4096 / p[(d, m, n)] / 1e9 for n in NS]
            ratio = min(b / bw[0] for b in bw)
            worst = min(worst, ratio)
            print(f"{d[7:]:38s} m {m:2d}: " + " / ".join(f"{b:.2f}" for b in bw) + f"  min ratio {ratio:.3f}")
    print("holds" if worst >= 0.9 else "fails", f"(worst ratio {worst:.3f}; n {' / '.join(map(str, NS))})")
    return 0 if worst >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
