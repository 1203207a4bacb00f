#!/usr/bin/env python3
"""neusight collector: micro-benchmarks GEMM, BMM, attention, element-wise, softmax and layer-norm kernels on
your GPU and writes them in the CSV format of our training data (see README.md in this folder).

  collect.py run --out DIR [--quick] [--families ...] [--dtypes ...]   measure (needs PyTorch + a GPU), then convert
  collect.py convert MANIFEST --out DIR                               profiler traces -> CSVs (no torch needed)
  collect.py grid [--quick] [--families ...] [--dtypes ...]           print the cases a run would measure
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import convert  # noqa: E402
import grids  # noqa: E402


def _list(value, known, what):
    items = [x.strip() for x in value.split(",") if x.strip()]
    bad = [x for x in items if x not in known]
    if bad or not items:
        raise argparse.ArgumentTypeError("unknown %s '%s' (known: %s)" % (what, ",".join(bad) or value, ",".join(known)))
    return items


def _grid_args(p):
    p.add_argument("--families", default=",".join(grids.FAMILIES),
                   type=lambda v: _list(v, grids.FAMILIES, "family"),
                   help="comma-separated families (default: all): " + ",".join(grids.FAMILIES))
    p.add_argument("--dtypes", default="fp32", type=lambda v: _list(v, grids.DTYPES, "dtype"),
                   help="comma-separated dtypes (default fp32): " + ",".join(grids.DTYPES))
    p.add_argument("--ops", type=lambda v: _list(v, grids.ELEMENTWISE_OPS, "elementwise op"),
                   help="element-wise ops to run (default all): " + ",".join(grids.ELEMENTWISE_OPS))
    p.add_argument("--quick", action="store_true", help="a small grid (minutes instead of hours)")
    p.add_argument("--samples", type=int, default=1, help="shapes drawn per bin combination (default 1)")
    p.add_argument("--seed", type=int, default=42, help="seed of the shape draws (default 42)")


def _cases(a):
    cases, unsupported = grids.cases(a.families, a.dtypes, a.quick, a.samples, a.seed, a.ops)
    for fam, dt in unsupported:
        print("collect: note: %s is not collected in %s (supported: %s)"
              % (fam, dt, ",".join(grids.SUPPORTED[fam])), file=sys.stderr)
    if not cases:
        raise SystemExit("collect: error: no case to run for families %s and dtypes %s"
                         % (",".join(a.families), ",".join(a.dtypes)))
    return cases


def raw_dir(out):
    """OUT/raw for a run's traces and manifest; OUT/raw-2, raw-3, ... when an earlier run's manifest is there, so a
    second run into the same folder (other dtypes or families) never replaces the first run's raw files."""
    raw, n = os.path.join(out, "raw"), 1
    while os.path.exists(os.path.join(raw, "manifest.json")):
        n += 1
        raw = os.path.join(out, "raw-%d" % n)
    return raw


def main(argv=None):
    ap = argparse.ArgumentParser(prog="collect.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="measure on this machine's GPU (PyTorch), then write the CSVs")
    _grid_args(r)
    r.add_argument("--out", required=True, help="output folder: raw/ (traces, manifest) and the CSVs")
    r.add_argument("--warmup", type=int, default=5, help="untimed runs per case (default 5)")
    r.add_argument("--repeat", type=int, default=25,
                   help="timed runs per case (default 25; latency = mean of the fastest 5)")
    r.add_argument("--profile-runs", type=int, default=3,
                   help="profiled runs per case for kernel names and grids (default 3)")
    r.add_argument("--max-gb", type=float, default=8.0, help="skip cases whose tensors exceed this (default 8)")

    c = sub.add_parser("convert", help="write the CSVs from a run's manifest and profiler traces (no torch)")
    c.add_argument("manifest", help="manifest.json written by `run` (traces are found beside it)")
    c.add_argument("--out", required=True, help="output folder of the CSVs")

    g = sub.add_parser("grid", help="print the cases `run` would measure, one per line")
    _grid_args(g)

    a = ap.parse_args(argv)
    try:
        if a.cmd == "grid":
            for case in _cases(a):
                print(case["id"], case["family"], case["op"], case["dtype"],
                      " ".join("%s=%d" % kv for kv in case["dims"].items()))
            return 0
        if a.cmd == "run":
            if a.warmup < 0 or a.repeat < 1 or a.profile_runs < 1:
                raise SystemExit("collect: error: --warmup must be >= 0, --repeat and --profile-runs >= 1")
            import bench  # imports torch lazily inside run()
            cases = _cases(a)
            raw = raw_dir(a.out)
            print("collect: %d cases, %d warm-up + %d timed runs each -> %s" % (len(cases), a.warmup, a.repeat, raw),
                  file=sys.stderr)
            bench.run(cases, raw, a.warmup, a.repeat, a.profile_runs, a.max_gb)
            manifest = os.path.join(raw, "manifest.json")
        else:
            manifest = a.manifest
        written = convert.convert(manifest, a.out)
        for rel, n in written.items():
            print("%6d rows  %s" % (n, os.path.join(a.out, rel)))
        return 0
    except convert.ConvertError as e:
        print("collect: error: %s" % e, file=sys.stderr)
        return 1
    except ImportError as e:
        print("collect: error: `run` needs PyTorch with GPU support (%s); `convert` and `grid` do not" % e,
              file=sys.stderr)
        return 1
    except RuntimeError as e:
        print("collect: error: %s" % e, file=sys.stderr)
        return 1


def _main_piped():
    """main(), where a reader that stops early (`collect.py grid | head`) ends the output quietly, as in other tools."""
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # the reader is gone: nothing more to say to it, and Python's flush at exit must not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command a pipe ended


if __name__ == "__main__":
    sys.exit(_main_piped())
