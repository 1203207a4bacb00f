"""Stage 2 of the collector: PyTorch-profiler Chrome traces + the run's manifest -> our micro-benchmark CSVs.

Pure Python (no torch import), so CI tests it on a checked-in sample. See README.md in this folder.

The trace is what torch.profiler's export_chrome_trace writes: CPU events (cat "user_annotation" for
record_function ranges, "cuda_runtime"/"cuda_driver" for launches, with args.correlation) and GPU events
(cat "kernel" with name, dur in microseconds, args.correlation, args.grid, args.block). Stage 1 wraps every
profiled run of case <id> in record_function("nscase/<id>/<run>"); a kernel belongs to the run whose range
contains the CPU launch call it correlates with. Latency is the mean of the 5 fastest of the case's CUDA-event
times (manifest `event_ms`, ms), as the data's collector measured it; a case without them falls back to the
profiled runs' summed kernel durations.

Written files, in the layout and columns of ../shared/data/neusight/dataset/train/collect:
  <op>/p<torch>/<Device>.csv           fp32 rows, exactly the data's columns
  <op>/p<torch>/<dtype>/<Device>.csv   tf32/fp16/bf16/fp8 rows: the same columns plus `Dtype`
  context_attention/p<torch>/[<dtype>/]<Device>.csv  attention (bf16 at the top, fp16 in fp16/), in the
                                       columns of ../shared/data/aiconfigurator/*/context_attention.csv plus the
                                       kernel's grid, block and kernel list
"""

import csv
import gzip
import io
import json
import os
import re
import sys

import grids

NEUSIGHT_COLUMNS = ["OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name", "Warps per SM",
                    "Blocks per SM", "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z", "CUDA Version",
                    "Kernels"]
ATTENTION_COLUMNS = ["framework", "version", "device", "op_name", "kernel_source", "batch_size", "isl", "num_heads",
                     "num_key_value_heads", "head_dim", "beam_width", "attn_dtype", "kv_cache_dtype", "step",
                     "window_size", "latency", "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z", "Kernels"]
GEMM_DIMS, VEC_DIMS = ["B", "M", "N", "K"], ["B", "H"]
ATTENTION_DIMS = ["batch_size", "isl", "num_heads", "head_dim"]
TORCH_DTYPE_NAME = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp8": "fp8"}
FASTEST = 5  # latency = mean of the fastest 5 timed iterations, as the data's collector (method-neusight.md §4.2)
ANNOTATION = re.compile(r"^nscase/(c\d+)/(\d+)$")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}


class ConvertError(Exception):
    pass


def _load_json(path):
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise ConvertError("%s: cannot read (%s)" % (path, e.strerror or e))
    except json.JSONDecodeError as e:
        raise ConvertError("%s:%d:%d: not JSON (%s)" % (path, e.lineno, e.colno, e.msg))
    except (UnicodeDecodeError, EOFError) as e:
        raise ConvertError("%s: not a JSON text (%s)" % (path, e))


def _got(obj, key):
    """What a trace event holds under `key`, for an error: the value (repr), or "nothing" when it is absent."""
    if not isinstance(obj, dict) or key not in obj:
        return "nothing"
    v = repr(obj[key])
    return v if len(v) <= 80 else v[:77] + "..."


def _int3(v, where, what):
    if not (isinstance(v, list) and len(v) == 3 and all(isinstance(x, int) and x >= 1 for x in v)):
        raise ConvertError("%s: args.%s must be three positive integers (got %r)" % (where, what, v))
    return v


def trace_kernels(path):
    """{(case id, iteration): [kernel, ...]} of one trace, kernels in launch order, and the count of kernels
    outside any case (allocation, warm-up). kernel = {name, dur_us, grid, block}."""
    doc = _load_json(path)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise ConvertError("%s: no traceEvents list (not a Chrome trace)" % path)
    ranges = {}   # (pid, tid) -> [(start, end, key)]
    launches = {}  # correlation -> (pid, tid, ts)
    kernels = []
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        where = "%s: traceEvents[%d]" % (path, i)
        cat, args = str(e.get("cat", "")).lower(), e.get("args") or {}
        if cat == "kernel":
            corr = args.get("correlation")
            if not isinstance(corr, int):
                raise ConvertError("%s: kernel '%s' has no integer args.correlation (got %s)"
                                   % (where, e.get("name"), _got(args, "correlation")))
            dur = e.get("dur")
            if not (isinstance(dur, (int, float)) and dur >= 0):
                raise ConvertError("%s: kernel '%s' has no duration (dur must be a number >= 0, got %s)"
                                   % (where, e.get("name"), _got(e, "dur")))
            name = e.get("name")
            if not isinstance(name, str) or not name:
                raise ConvertError("%s: kernel without a name (got %s)" % (where, _got(e, "name")))
            kernels.append({"name": name, "dur_us": float(dur), "ts": e.get("ts", 0), "corr": corr,
                            "grid": _int3(args.get("grid"), where, "grid"),
                            "block": _int3(args.get("block"), where, "block")})
        elif cat in GPU_CATS:
            continue
        elif cat == "user_annotation":
            m = ANNOTATION.match(str(e.get("name", "")))
            if m:
                ts, dur = e.get("ts"), e.get("dur")
                if not (isinstance(ts, (int, float)) and isinstance(dur, (int, float))):
                    raise ConvertError("%s: annotation '%s' has no ts/dur numbers (got ts %s, dur %s)"
                                      % (where, e.get("name"), _got(e, "ts"), _got(e, "dur")))
                ranges.setdefault((e.get("pid"), e.get("tid")), []).append((ts, ts + dur, (m.group(1), int(m.group(2)))))
        elif isinstance(args.get("correlation"), int):
            launches[args["correlation"]] = (e.get("pid"), e.get("tid"), e.get("ts"))
    for r in ranges.values():
        r.sort()
    out, outside = {}, 0
    for k in sorted(kernels, key=lambda k: k["ts"]):
        launch = launches.get(k["corr"])
        key = None
        if launch is not None:
            pid, tid, ts = launch
            # The launching thread's ranges first; then any thread's (stage 1 is single-threaded, but profiler
            # versions differ in the thread ids they give runtime events). A few hundred per trace: a scan will do.
            for rs in [ranges.get((pid, tid), [])] + [r for k, r in ranges.items() if k != (pid, tid)]:
                key = next((rk for start, end, rk in rs if start <= ts <= end), None)
                if key is not None:
                    break
        if key is None:
            outside += 1
            continue
        out.setdefault(key, []).append({x: k[x] for x in ("name", "dur_us", "grid", "block")})
    return out, outside


def _fmt(x):
    return "%.8g" % x


def _load_manifest(path):
    m = _load_json(path)
    if not isinstance(m, dict) or m.get("format") != "neusight-collect-manifest":
        raise ConvertError("%s: not a collector manifest (\"format\" must be \"neusight-collect-manifest\")" % path)
    for key in ("device", "software", "cases", "traces"):
        if key not in m:
            raise ConvertError("%s: missing \"%s\"" % (path, key))
    dev = m["device"]
    if not (isinstance(dev, dict) and isinstance(dev.get("name"), str) and dev["name"]
            and isinstance(dev.get("num_sms"), int) and dev["num_sms"] > 0):
        raise ConvertError("%s: \"device\" needs a name and a positive integer num_sms" % path)
    sw = m["software"]
    if not (isinstance(sw, dict) and isinstance(sw.get("torch"), str) and sw["torch"]):
        raise ConvertError("%s: \"software\" needs the torch version" % path)
    return m


def _versions(sw):
    torch_v = "p" + sw["torch"].split("+")[0]
    if sw.get("cuda"):
        accel = "cu" + str(sw["cuda"]).replace(".", "")
    elif sw.get("hip"):
        accel = "rocm" + ".".join(str(sw["hip"]).split(".")[:2])
    else:
        accel = ""
    cudnn = sw.get("cudnn")
    return torch_v, accel, "" if cudnn is None else str(cudnn)


def convert(manifest_path, out_dir, log=sys.stderr):
    """Writes the CSVs; returns {relative path: row count}. Raises ConvertError, writing nothing, on bad input."""
    m = _load_manifest(manifest_path)
    base = os.path.dirname(os.path.abspath(manifest_path))
    found, outside = {}, 0
    if not isinstance(m["traces"], list) or not m["traces"]:
        raise ConvertError("%s: \"traces\" must list at least one trace file" % manifest_path)
    for t in m["traces"]:
        got, n = trace_kernels(os.path.join(base, t))
        outside += n
        for key, ks in got.items():
            if key in found:
                raise ConvertError("%s: case %s iteration %d appears in two traces" % (t, key[0], key[1]))
            found[key] = ks
    by_case = {}
    for (cid, it), ks in found.items():
        by_case.setdefault(cid, {})[it] = ks

    dev, num_sms = m["device"]["name"], m["device"]["num_sms"]
    torch_v, accel, cudnn = _versions(m["software"])
    files = {}  # relative path -> (columns, rows)
    seen_ids = set()
    # A manifest not measured on a GPU (tests/fixtures/collect's "synthetic": its note; bench.py writes false): its
    # rows get a Synthetic column holding the note, so the CSVs do not pass for measured data.
    synthetic = m.get("synthetic")
    synthetic = (synthetic if isinstance(synthetic, str) and synthetic else "true" if synthetic else "")
    for i, c in enumerate(m["cases"]):
        where = "%s: cases[%d]" % (manifest_path, i)
        if not isinstance(c, dict) or not all(k in c for k in ("id", "family", "op", "dtype", "dims")):
            raise ConvertError("%s: a case needs id, family, op, dtype and dims" % where)
        cid, fam, op, dtype, dims = c["id"], c["family"], c["op"], c["dtype"], c["dims"]
        if cid in seen_ids:
            raise ConvertError("%s: case id %s repeats" % (where, cid))
        seen_ids.add(cid)
        iters = by_case.pop(cid, None)
        if c.get("skipped"):
            continue  # stage 1 could not run it (out of memory, unsupported); it said why then
        if fam not in grids.SUPPORTED or dtype not in grids.SUPPORTED[fam]:
            raise ConvertError("%s: case %s: no %s family in %s (known: %s)" % (where, cid, fam, dtype, ", ".join(
                "%s in %s" % (f, "/".join(d)) for f, d in grids.SUPPORTED.items())))
        ops = grids.ELEMENTWISE_OPS if fam == "elementwise" else [grids.OPNAME[fam]]
        if op not in ops:
            raise ConvertError("%s: case %s: op '%s' is not one of the %s family's (%s)" % (where, cid, op, fam,
                                                                                          ", ".join(ops)))
        names = GEMM_DIMS if fam in ("bmm", "linear") else ATTENTION_DIMS if fam == "attention" else VEC_DIMS
        if not isinstance(dims, dict) or not all(isinstance(dims.get(d), int) and dims[d] >= 1 for d in names):
            raise ConvertError("%s: dims of a %s case must be positive integers %s (got %r)"
                               % (where, fam, ", ".join(names), dims))
        if not iters:
            raise ConvertError("%s: case %s (%s %s %s) has no kernels in the traces" % (where, cid, op, dtype, dims))
        if len(iters) < int(m.get("profile_runs", 0)):
            print("collect: warning: %s: case %s has %d of %d profiled runs in the traces"
                  % (where, cid, len(iters), m["profile_runs"]), file=log)
        times = c.get("event_ms")
        if times is not None:  # CUDA-event times of the timed runs, as the data's collector measured
            if not (isinstance(times, list) and times and
                    all(isinstance(t, (int, float)) and t > 0 for t in times)):
                raise ConvertError("%s: event_ms of case %s must be a list of positive times in ms" % (where, cid))
        else:  # no event times (a trace recorded by other means): the profiled runs' summed kernel time
            times = [sum(k["dur_us"] for k in ks) / 1000.0 for ks in iters.values()]
        fastest = sorted(times)[:FASTEST]
        latency_ms = sum(fastest) / len(fastest)
        first = iters[min(iters)]
        total = {}
        for ks in iters.values():
            for k in ks:
                total[k["name"]] = total.get(k["name"], 0.0) + k["dur_us"]
        main = _main_kernel(fam, first, total)
        gx, gy, gz = main["grid"]
        bx, by, bz = main["block"]
        blocks = gx * gy * gz
        warps = blocks * -(-(bx * by * bz) // 32)
        kernels = ";" + ";".join(k["name"] for k in first)
        if fam == "attention":
            # bf16 (what the aiconfigurator data holds) at the top, other dtypes in their own folder: a later run
            # in another dtype must not replace the bf16 rows (one file per dtype, as for the other families).
            sub = ["context_attention", torch_v] + ([] if dtype == "bf16" else [dtype])
            rel = os.path.join(*(sub + [_safe(dev) + ".csv"]))
            row = ["PyTorch", m["software"]["torch"], dev, "context_attention", main["name"], dims["batch_size"],
                   dims["isl"], dims["num_heads"], dims["num_heads"], dims["head_dim"], 1,
                   TORCH_DTYPE_NAME.get(dtype, dtype), TORCH_DTYPE_NAME.get(dtype, dtype), 0, 0, repr(latency_ms),
                   gx, gy, gz, bx, by, bz, kernels]
            cols = ATTENTION_COLUMNS
        else:
            sub = [op, torch_v] + ([] if dtype == "fp32" else [dtype])
            rel = os.path.join(*sub, _safe(dev) + ".csv")
            row = [op, repr(latency_ms), dev, torch_v, cudnn, main["name"], _fmt(warps / num_sms),
                   _fmt(blocks / num_sms), gx, gy, gz, bx, by, bz, accel, kernels] + [dims[d] for d in names]
            cols = NEUSIGHT_COLUMNS + names
            if dtype != "fp32":
                row.append(dtype)
                cols = cols + ["Dtype"]
        if synthetic:  # the manifest's note travels with every row: `neusight train` / `eval kernels` warn of it
            row = row + [synthetic]
            cols = cols + ["Synthetic"]
        if rel in files and files[rel][0] != cols:
            raise ConvertError("%s: case %s does not fit the columns of %s" % (where, cid, rel))
        files.setdefault(rel, (cols, []))[1].append(row)
    if by_case:
        extra = sorted(by_case)
        raise ConvertError("%s: the traces hold cases the manifest does not list: %s"
                           % (manifest_path, ", ".join(extra[:5]) + (" ..." if len(extra) > 5 else "")))
    if not files:
        raise ConvertError("%s: no case was measured; nothing to write" % manifest_path)
    if outside:
        print("collect: %d kernels outside the timed iterations (allocation, warm-up) ignored" % outside, file=log)
    _write_all(out_dir, files)
    return {rel: len(rows) for rel, (cols, rows) in sorted(files.items())}


# PyTorch's own kernels (element-wise, casts, reductions: at::native::…), vLLM's quantisation kernels (vllm::…) and
# bench.py's Triton copies of them (ns_fp8_…) around a library GEMM: the fp8 case's activation quantisation (absmax,
# scale, cast to e4m3; bench.py) can outlast a small GEMM, yet the row's kernel is the GEMM.
TORCH_NATIVE = re.compile(r"\b(at::native|vllm)::|^ns_fp8_")


def _main_kernel(fam, kernels, total):
    """The kernel doing the work: the longest over the profiled runs (a split-K GEMM's reduction is shorter than
    the GEMM); for bmm/linear the longest that is not one of PyTorch's own kernels, if there is one."""
    pool = kernels
    if fam in ("bmm", "linear"):
        pool = [k for k in kernels if not TORCH_NATIVE.search(k["name"])] or kernels
    return max(pool, key=lambda k: total[k["name"]])


def _safe(name):
    return re.sub(r"[/\\\0]", "_", name)


def _write_all(out_dir, files):
    """Every file to a temporary name first, then renamed into place: an error leaves no half-written CSV."""
    temps = []
    try:
        for rel, (cols, rows) in files.items():
            path = os.path.join(out_dir, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(cols)
            w.writerows(rows)
            tmp = path + ".tmp%d" % os.getpid()
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(buf.getvalue())
            temps.append((tmp, path))
    except OSError as e:
        for tmp, _ in temps:
            os.unlink(tmp)
        raise ConvertError("%s: cannot write (%s)" % (getattr(e, "filename", out_dir), e.strerror or e))
    for tmp, path in temps:
        os.replace(tmp, path)


if __name__ == "__main__":
    # A module of collect.py: run directly, it is `collect.py convert` (its --help, its arguments), not a silent no-op.
    import collect
    print("convert.py is the module behind `collect.py convert`; running that:", file=sys.stderr)
    sys.exit(collect.main(["convert"] + sys.argv[1:]))
