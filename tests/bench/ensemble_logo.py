#!/usr/bin/env python3
"""Seed-ensemble study (weights/ENSEMBLE_RULE.md): combine members' per-row forecasts offline.

    tests/bench/ensemble_logo.py --work DIR --part tc|fp32|e2e [--seeds 0,1,2] [--tag T] [--families F,G]

Reads DIR/<part>/<seed>/<GPU>.json (written by weights/ensemble_study.sh: `neusight eval kernels --format json`),
keeps the held-out GPU's rows of each family, and prints per held-out GPU x family the MAPE of each member, of the
mean of the members' MAPEs, and of the ensembles (geometric mean of the members' latencies: the pre-registered
combiner; median: information only). Rows are matched by position and checked by (gpu, op, where, measured_ms).
--part e2e reads DIR/e2e/<seed>/<GPU>.json (weights/ensemble_e2e.sh: `eval models --format json`) and combines the
members' whole-model totals (not per kernel: the exact per-kernel ensemble needs engine support; by Hoelder's
inequality the geometric mean of totals is an upper bound of the total of per-kernel geometric means).
--tag T reads DIR/T instead of DIR/<part> (e.g. a run of weights/ensemble_study.sh --tag T --epochs 300).
"""
import argparse, glob, json, math, os, statistics, sys

ap = argparse.ArgumentParser()
ap.add_argument("--work", required=True)
ap.add_argument("--part", required=True, choices=["tc", "fp32", "e2e"]); ap.add_argument("--tag", default=None)
ap.add_argument("--seeds", default="0,1,2")
ap.add_argument("--families", default=None, help="comma-separated families (default: the part's)")
args = ap.parse_args()
seeds = args.seeds.split(",")
fams = {"tc": ["gemm_tc16"], "fp32": ["linear", "softmax"], "e2e": ["end to end"]}[args.part]
if args.families:
    fams = args.families.split(",")
base = os.path.join(args.work, args.tag or args.part)
gpus = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(base, seeds[0], "*.json")))
short = lambda g: g.replace("_", " ")


def load(seed, g):
    with open(os.path.join(base, seed, g + ".json")) as f:
        return json.load(f)["rows"]


def mape(pred, meas):
    return 100 * sum(abs(p - m) / m for p, m in zip(pred, meas)) / len(meas)


res = {}  # (family, gpu) -> dict
for g in gpus:
    if not all(os.path.exists(os.path.join(base, s, g + ".json")) for s in seeds):
        print(f"# {g}: not every seed done, skipped", file=sys.stderr)
        continue
    members = [load(s, g) for s in seeds]
    if args.part == "e2e":
        for r in members[0]:
            r["family"], r["op"], r["where"] = "end to end", r["config"], r["mode"]
        for m in members[1:]:
            for r in m:
                r["family"], r["op"], r["where"] = "end to end", r["config"], r["mode"]
    key = lambda r: (r["gpu"], r["op"], r["where"], r["measured_ms"], r["family"])
    for m in members[1:]:
        assert len(m) == len(members[0]) and all(key(a) == key(b) for a, b in zip(m, members[0])), "row mismatch"
    # held-out GPU's name: the one whose canonical name matches the fold's (spaces as underscores)
    names = {r["gpu"] for r in members[0]}
    held = [n for n in names if n.replace(" ", "_") in g or g.endswith(n.replace(" ", "_"))]
    for fam in fams:
        idx = [i for i, r in enumerate(members[0]) if r["family"] == fam and (not held or r["gpu"] in held)]
        if not idx:
            continue
        meas = [members[0][i]["measured_ms"] for i in idx]
        per = [[m[i]["predicted_ms"] for i in idx] for m in members]
        geo = [math.exp(sum(math.log(p[j]) for p in per) / len(per)) for j in range(len(idx))]
        med = [statistics.median(p[j] for p in per) for j in range(len(idx))]
        ms = [mape(p, meas) for p in per]
        res[(fam, g)] = dict(rows=len(idx), members=ms, mean_member=sum(ms) / len(ms), geo=mape(geo, meas),
                             med=mape(med, meas), gpu=",".join(sorted({members[0][i]["gpu"] for i in idx})))

for fam in fams:
    rows = [(g, res[(fam, g)]) for g in gpus if (fam, g) in res]
    if not rows:
        continue
    print(f"\n{fam}: MAPE % per held-out GPU, seeds {','.join(seeds)}")
    print(f"{'held-out GPU':28s} {'rows':>5s} " + " ".join(f"{'s' + s:>7s}" for s in seeds)
          + f" {'mean mb':>8s} {'geomean':>8s} {'median':>8s} {'geo-s0':>7s}")
    for g, r in rows:
        print(f"{r['gpu'][:28]:28s} {r['rows']:5d} " + " ".join(f"{x:7.2f}" for x in r["members"])
              + f" {r['mean_member']:8.2f} {r['geo']:8.2f} {r['med']:8.2f} {r['geo'] - r['members'][0]:+7.2f}")
    avg = lambda k: sum(r[k] for _, r in rows) / len(rows)
    m0 = [sum(r["members"][i] for _, r in rows) / len(rows) for i in range(len(seeds))]
    print(f"{'mean':28s} {'':5s} " + " ".join(f"{x:7.2f}" for x in m0)
          + f" {avg('mean_member'):8.2f} {avg('geo'):8.2f} {avg('med'):8.2f} {avg('geo') - m0[0]:+7.2f}")
