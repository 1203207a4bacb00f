#!/usr/bin/env python3
"""weights/band_spread.py — the uncertainty band's width factor (`spread`, scripts/neusight/uncertainty.lua) from
end-to-end labels forecast leave one GPU out.

  python3 weights/band_spread.py EVAL.json... [--target 0.8] [--table weights/nvidia/uncertainty.toml] [--write]

Each EVAL.json is one held-out GPU's `neusight eval models … --format json` (weights/band_coverage.sh makes them, with
raw nested tables: no spread). The band scales ln-distances from its median by the factor, q'(u) = q50·(q(u)/q50)^k,
so per label z = the smallest factor whose band holds the measured time (0 at the median, inf if the band's half on
the measured side is empty). The fit is the smallest factor, rounded up to 3 decimals (the value written is the value
that covers), that holds `target` of all labels; its coverage is checked leave one GPU out: each GPU's labels against
the factor fitted on the other GPUs' labels only. --write puts the fit into the table (`spread = …` after `levels`);
a fit outside (0, 4] (the loader's range) is an error and writes nothing.
"""
import argparse
import json
import math
import os
import re
import sys


KEYS = ("measured_ms", "predicted_ms_p10", "predicted_ms_p50", "predicted_ms_p90", "predicted_ms")


def z_of(row):
    """The smallest width factor whose band holds row's measured time (inf: none does; None: the row has no band).
    A row with part of a band, or a time that is not a finite number > 0, is an error: it would count as outside."""
    m, p10, p50, p90, forecast = (row.get(k) for k in KEYS)
    if (p10, p50, p90) == (None, None, None):
        return None
    where = f"band_spread.py: {row.get('config', 'a row')} of {row.get('gpu', '?')}"
    for k, v in zip(KEYS, (m, p10, p50, p90, forecast)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{where}: {k} = {v!r} is not a finite number > 0")
    if not p10 <= p50 <= p90:  # a reversed band would count as a label outside it
        raise ValueError(f"{where}: the band is not ordered (p10 {p10}, p50 {p50}, p90 {p90})")
    if "gpu" not in row:  # the check leaves one GPU out
        raise ValueError(f"{where}: no gpu")
    x = math.log(m / p50)
    if x == 0:
        return 0.0
    half = math.log((p90 if x > 0 else p10) / p50)
    return x / half if half * x > 0 else math.inf


def fit(zs, target):
    """The smallest factor (rounded up to 3 decimals) holding `target` of zs."""
    v = sorted(zs)
    need = v[max(0, math.ceil(target * len(v) - 1e-9) - 1)]
    return math.ceil(need * 1000 - 1e-9) / 1000 if math.isfinite(need) else math.inf


def inside(zs, k):
    return sum(z <= k for z in zs)


def read_spread(path):
    """The table's `spread` (the band's width factor), None when it has none."""
    with open(path) as h:
        m = re.search(r"^spread\s*=\s*([^\s#]+)", h.read(), re.M)
    return float(m.group(1)) if m else None


def write(path, k, n):
    if not (math.isfinite(k) and 0 < k <= 4):
        sys.exit(f"band_spread.py: the fitted factor {k} is outside (0, 4]: {path} not written")
    with open(path) as h:
        text = h.read()
    if not re.search(r"^levels = .*\n", text, re.M):
        sys.exit(f"band_spread.py: {path} has no `levels` line: not written")
    line = f"spread = {k:.3f}  # the band's width factor: weights/band_spread.py ({n} end-to-end labels)"
    text = re.sub(r"^spread\s*=.*\n", "", text, flags=re.M)
    text = re.sub(r"^(levels = .*\n)", lambda m: m.group(1) + line + "\n", text, count=1, flags=re.M)
    with open(path + ".tmp", "w") as h:
        h.write(text)
    os.replace(path + ".tmp", path)
    print(f"wrote {path}: {line}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("evals", nargs="+")
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument("--table", default=os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                    "nvidia", "uncertainty.toml")))
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    if not 0 < a.target <= 1:
        sys.exit(f"band_spread.py: --target must be a share in (0, 1] (got {a.target})")
    zs, bands = {}, []
    for f in a.evals:
        with open(f) as h:
            j = json.load(h)
        for r in j["rows"]:
            try:
                z = z_of(r)
            except ValueError as e:
                sys.exit(f"{e} ({f})")
            if z is None:
                continue
            zs.setdefault(r["gpu"], []).append(z)
            bands.append((r["predicted_ms"], r["predicted_ms_p10"], r["predicted_ms_p50"], r["predicted_ms_p90"]))
    if len(zs) < 2:
        sys.exit("band_spread.py: labels of at least two GPUs with a band are needed (the check leaves one out)")
    every = [z for g in zs for z in zs[g]]
    k = fit(every, a.target)

    def width(f):  # mean (p90 - p10) / forecast at factor f
        return sum(c * ((d / c) ** f - (b / c) ** f) / p for p, b, c, d in bands) / len(bands)

    n = len(every)
    print(f"width factor (spread) for {100 * a.target:.0f} % of {n} labels: {k:.3f} ({inside(every, k)} inside in "
          f"sample; raw band {inside(every, 1.0)}); mean width (p90 - p10) / forecast {100 * width(1.0):.0f} % -> "
          f"{100 * width(k) if math.isfinite(k) else math.inf:.0f} %")
    print("leave one GPU out (each GPU's labels against the factor fitted on the other GPUs' labels):")
    total = 0
    for g in sorted(zs):
        k_g = fit([z for o in zs if o != g for z in zs[o]], a.target)
        c = inside(zs[g], k_g)
        total += c
        print(f"  {g:24s} factor {k_g:.3f}: {c:3d} of {len(zs[g]):3d} inside p10-p90 ({100 * c / len(zs[g]):3.0f} %)")
    print(f"  {'all':24s} {total:19d} of {n:3d} inside p10-p90 ({100 * total / n:3.0f} %)")
    s = read_spread(a.table) if os.path.exists(a.table) else None
    if s is not None:
        print(f"{a.table}: spread {s:.3f}, {inside(every, s)} of {n} inside (in sample)")
    if a.write:
        write(a.table, k, n)


if __name__ == "__main__":
    main()
