#!/usr/bin/env python3
"""weights/uncertainty.py — quantiles of the predictor's leave-one-GPU-out errors per kernel family, the data of
the forecast's uncertainty band (scripts/neusight/uncertainty.lua). Run by weights/uncertainty.sh; standard library
only. Each fold keeps its own quantiles: the band draws a fold (a GPU's bias, shared by the family's kernels) and then
kernels within it.

    weights/uncertainty.py --work DIR --gpus-dir gpus --out weights/nvidia/uncertainty.toml

DIR/rows/<GPU>.json are `neusight eval kernels --format json` outputs of one fold: GPU's rows forecast by weights
trained without any row of it. For each family the residual is r = ln(measured / predicted) per row; a fold's rows
are weighted by their measured time (a model's time is dominated by its longest kernels). A fold is "outside" when
its GPU's SM count, memory bandwidth or the family's peak lies outside the range of the fold's training GPUs (the
other GPUs of the group); the flag is recorded for the accuracy report, the band draws from every fold.
Each family's range is written of the GPUs the weights were trained on, as their manifests say (training.gpus of
DIR/folds/<X>/nvidia/<family>/model.toml, trained_gpus below): the field scripts/neusight/uncertainty.lua reads (its
training_range is the rule the engine applies; Python cannot call it, so the range here is for the record, of the same
GPUs; the engine reads only its peak_field).
A family with no rows in DIR (e.g. `uncertainty.sh --part tc` re-derives only the tensor-core and attention folds)
keeps its section of the existing --out file byte for byte. Rows of a held-out evaluation GPU (weights/HELD_OUT) are
an error: those GPUs are never a fold.
"""
import argparse
import json
import math
import os
import re
import sys
import tomllib

from held_out import gpu_tables, held_out_matcher  # weights/held_out.py

LEVELS = [0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]
# The GPU-file field of each family's peak, and the group of GPUs its folds hold out.
FAMILIES = {
    "bmm": ("peak_fp32_tflops", "fp32"), "linear": ("peak_fp32_tflops", "fp32"),
    "elementwise": ("peak_fp32_tflops", "fp32"), "softmax": ("peak_fp32_tflops", "fp32"),
    "layernorm": ("peak_fp32_tflops", "fp32"),
    "gemm_tc16": ("peak_bf16_tflops", "tc"), "gemm_fp8": ("peak_fp8_tflops", "tc"),
    "attention_prefill": ("peak_bf16_tflops", "tc"), "attention_decode": ("peak_bf16_tflops", "tc"),
}
FEATURES = ["num_sm", "mem_bw_gbps"]


def die(msg):
    print(f"uncertainty.py: {msg}", file=sys.stderr)
    sys.exit(1)


def weighted_quantiles(pairs, levels):
    """pairs: (value, weight); linear interpolation of the weighted empirical CDF at mid-points."""
    pairs = sorted(pairs)
    total = sum(w for _, w in pairs)
    xs, cs, acc = [], [], 0.0
    for v, w in pairs:
        xs.append(v)
        cs.append((acc + w / 2) / total)
        acc += w
    out = []
    for q in levels:
        if q <= cs[0]:
            out.append(xs[0])
        elif q >= cs[-1]:
            out.append(xs[-1])
        else:
            i = next(j for j in range(1, len(cs)) if cs[j] >= q)
            t = (q - cs[i - 1]) / (cs[i] - cs[i - 1]) if cs[i] > cs[i - 1] else 0
            out.append(xs[i - 1] + t * (xs[i] - xs[i - 1]))
    return out


def manifest_gpus(weights_dir, fam):
    """training.gpus of the manifest weights_dir/nvidia/<fam>/model.toml: the GPUs those weights were trained on, the
    field scripts/neusight/uncertainty.lua reads as such (r.trained_gpus: the band's centre, the calibration prior, the
    out-of-distribution range and the per-SM range warning all come from it; of the range written here it reads only
    `peak_field`). None when there is no manifest (a work dir of rows alone)."""
    path = os.path.join(weights_dir, "nvidia", fam, "model.toml")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as h:
        gpus = tomllib.load(h).get("training", {}).get("gpus")
    if not isinstance(gpus, list):
        die(f"{path}: no training.gpus")
    return gpus


def trained_gpus(fold_dirs, folds, fam):
    """The GPUs the weights a table goes with were trained on, from the manifests (manifest_gpus) of its folds' weights:
    each fold's are the others (checked: a fold whose weights name its own held-out GPU is an error), their union the
    full weights'. A fold without a manifest: the folds' GPUs themselves, as before the manifests were read. The range
    is written from Python (uncertainty.lua's training_range is the rule the engine applies; this script cannot call
    it), over the same field."""
    names = set()
    for g in folds:
        got = manifest_gpus(fold_dirs.get(g, ""), fam)
        if got is None:
            return sorted(folds)
        if g in got:
            die(f"{fold_dirs[g]}/nvidia/{fam}/model.toml: the weights of fold {g} were trained on {g}")
        names.update(got)
    return sorted(names)


def range_of(specs, names, peak):
    def span(key):
        vals = [specs[n][key] for n in names]
        return [min(vals), max(vals)]
    return {"num_sm": span("num_sm"), "mem_bw_gbps": span("mem_bw_gbps"), "peak_tflops": span(peak),
            "peak_field": peak, "architectures": sorted({specs[n]["architecture"] for n in names}),
            "gpus": sorted(names)}


def inside(spec, rng):
    return all(rng[k][0] <= spec[k] <= rng[k][1] for k in FEATURES) and \
        rng["peak_tflops"][0] <= spec[rng["peak_field"]] <= rng["peak_tflops"][1]


def fmt_list(xs):
    return "[" + ", ".join(f"{x:.4f}" if isinstance(x, float) else json.dumps(x) for x in xs) + "]"


def table(rows_by_fold, specs, group_gpus, only_families, header, kept=None, range_gpus=None):
    """rows_by_fold: fold gpu -> family -> [(r, w)]. group_gpus: family -> the GPUs of its group. range_gpus: family ->
    the GPUs its range is written of (the weights' manifests: trained_gpus; default the group)."""
    lines = [header, "format_version = 2", 'vendor = "nvidia"', f"levels = {fmt_list(LEVELS)}"]
    if kept and kept.get("spread"):
        lines.append(kept["spread"])
    lines.append("")
    for fam, (peak, _) in FAMILIES.items():
        if only_families and fam not in only_families:
            continue
        folds = {g: rs[fam] for g, rs in rows_by_fold.items() if rs.get(fam)}
        if not folds or not group_gpus[fam]:
            if kept and fam in kept:
                lines.append(kept[fam])
            continue
        lines.append(f"[families.{fam}]")
        lines.append(f"rows = {sum(len(rs) for rs in folds.values())}")
        names, outside, quants = sorted(folds), [], []
        for g in names:
            others = [o for o in group_gpus[fam] if o != g]
            outside.append(not (others and inside(specs[g], range_of(specs, others, peak))))
            tot = sum(w for _, w in folds[g])
            quants.append(weighted_quantiles([(r, w / tot) for r, w in folds[g]], LEVELS))
        lines.append(f"folds = {fmt_list(names)}")
        lines.append(f"fold_rows = {fmt_list([len(folds[g]) for g in names])}")
        lines.append("outside = [" + ", ".join("true" if o else "false" for o in outside) + "]")
        lines.append("quantiles = [")
        for g, q in zip(names, quants):
            lines.append(f"  {fmt_list(q)},  # {g}")
        lines.append("]")
        names_trained = (range_gpus or {}).get(fam) or group_gpus[fam]
        missing = [n for n in names_trained if n not in specs]
        if missing:
            die(f"the {fam} weights' training GPU {missing[0]} has no gpus/*.toml")
        rng = range_of(specs, names_trained, peak)
        lines.append(f"[families.{fam}.range]  # the training GPUs of the weights this table goes with")
        for k in ("num_sm", "mem_bw_gbps", "peak_tflops"):
            lines.append(f"{k} = {fmt_list([float(x) for x in rng[k]])}")
        lines.append(f"peak_field = {json.dumps(peak)}")
        lines.append(f"architectures = {fmt_list(rng['architectures'])}")
        lines.append(f"gpus = {fmt_list(rng['gpus'])}")
        lines.append("")
    return "\n".join(lines)


def kept_sections(path, families):
    """The [families.F] sections (with their sub-tables, up to the next family) of the existing file at path, for F
    in families, verbatim."""
    if not os.path.exists(path):
        return {}
    with open(path) as h:
        text = h.read()
    out, cur = {}, None
    for line in text.split("\n"):
        if line.startswith("[families."):  # [families.F] or one of its sub-tables [families.F.range]
            cur = line[len("[families."):].split("]")[0].split(".")[0]
            out.setdefault(cur, [])
        if cur is not None:
            out[cur].append(line)
    kept = {f: "\n".join(ls).rstrip("\n") + "\n" for f, ls in out.items() if f in families}
    # the band's width factor, fitted on the fp32 families' end-to-end coverage (weights/band_coverage.sh --write):
    # kept while those families are
    spread = [ln for ln in text.split("\n") if re.match(r"spread\s*=", ln)]  # as band_spread.py reads it
    if spread and all(f in families for f, (_, grp) in FAMILIES.items() if grp == "fp32"):
        kept["spread"] = spread[0]
    return kept


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as h:
        h.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--gpus-dir", default="gpus")
    ap.add_argument("--out", required=True)
    ap.add_argument("--held-out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "HELD_OUT"))
    a = ap.parse_args()
    tables = gpu_tables(a.gpus_dir)  # read once: a local <stem>.calibration.toml is not a GPU
    specs = {t["name"]: t for _, t in tables}
    is_held_out = held_out_matcher(a.held_out, a.gpus_dir, tables)
    rows_by_fold, group_of_fold, fold_dirs = {}, {}, {}
    rows_dir = os.path.join(a.work, "rows")
    for f in sorted(os.listdir(rows_dir)):
        if not f.endswith(".json"):
            continue
        with open(os.path.join(rows_dir, f)) as h:
            j = json.load(h)
        fams = {}
        for r in j["rows"]:
            if "/kv_" in r["family"]:  # eval kernels' attention_decode/kv_fp8: scored, never trained on, never a band
                continue
            if r["gpu"] not in specs:
                die(f"{f}: GPU {r['gpu']} has no gpus/*.toml")
            if is_held_out(r["gpu"]) or is_held_out(r["device"]):
                die(f"{f}: rows of {r['gpu']}, a held-out evaluation GPU ({a.held_out}): never a fold")
            m, p = r["measured_ms"], r["predicted_ms"]
            if not (m > 0 and p > 0 and math.isfinite(m) and math.isfinite(p)):
                die(f"{r['where']}: measured {m} / predicted {p} ms is not a positive number")
            fams.setdefault(r["family"], []).append((math.log(m / p), m))
        gpus = {r["gpu"] for r in j["rows"]}
        if len(gpus) != 1:
            die(f"{f}: rows of {len(gpus)} GPUs, one expected (the held-out one)")
        g = gpus.pop()
        fold_dirs[g] = os.path.join(a.work, "folds", f[:-len(".json")])  # uncertainty.sh: rows/<X>.json, folds/<X>/
        rows_by_fold.setdefault(g, {}).update(fams)
        for fam in fams:
            group_of_fold.setdefault(FAMILIES[fam][1], set()).add(g)
    group_gpus = {fam: sorted(group_of_fold.get(grp, ())) for fam, (_, grp) in FAMILIES.items()}
    # the ranges written: of the GPUs the weights were trained on, as their manifests say (trained_gpus)
    range_gpus = {fam: trained_gpus(fold_dirs, gs, fam) for fam, gs in group_gpus.items()}
    header = ("# weights/nvidia/uncertainty.toml — generated by weights/uncertainty.sh (weights/uncertainty.py); do not "
              "edit.\n# Per kernel family and leave-one-GPU-out fold (the GPU held out of training): quantiles at "
              "`levels` of\n# ln(measured / predicted) of its rows, time-weighted; `outside`: whether the fold's GPU "
              "lay outside the\n# other GPUs' range (SMs, bandwidth, the family's peak). Read by "
              "scripts/neusight/uncertainty.lua.")
    missing = [f for f in FAMILIES if not group_gpus[f]]
    kept = kept_sections(a.out, missing)
    write(a.out, table(rows_by_fold, specs, group_gpus, None, header, kept, range_gpus))
    print(f"{a.out}: {', '.join(sorted(f for f in FAMILIES if group_gpus[f]))}"
          + (f" (kept as they were: {', '.join(sorted(k for k in kept if k != 'spread'))}"
             + (", and the band's width factor" if "spread" in kept else "") + ")" if kept else ""))
    if "spread" not in kept:
        print(f"{a.out}: no band width factor (spread 1) until weights/band_coverage.sh --work {a.work} --write")
    # Nested tables for the end-to-end coverage check: fold G's weights with the other folds' residuals.
    for g in sorted(group_of_fold.get("fp32", ())):
        fold_dir = fold_dirs[g]
        if not os.path.isdir(os.path.join(fold_dir, "nvidia")):
            continue
        others = {o: rs for o, rs in rows_by_fold.items() if o != g}
        nested_groups = {fam: [o for o in gs if o != g] for fam, gs in group_gpus.items()}
        fams = [f for f, (_, grp) in FAMILIES.items() if grp == "fp32"]
        # the nested table's ranges are those of fold G's weights: their manifests' (the other GPUs of the group)
        nested_ranges = {f: manifest_gpus(fold_dir, f) or nested_groups[f] for f in FAMILIES}
        text = table(others, specs, {f: nested_groups[f] for f in FAMILIES}, fams,
                     f"# nested table of fold {g}: residuals of the other folds only", None, nested_ranges)
        write(os.path.join(fold_dir, "nvidia", "uncertainty.toml"), text)
        print(f"{fold_dir}/nvidia/uncertainty.toml (nested, without {g})")


if __name__ == "__main__":
    main()
