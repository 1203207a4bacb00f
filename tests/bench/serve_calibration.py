#!/usr/bin/env python3
# tests/bench/serve_calibration.py — what `neusight serve --batch … --calibrate FILE` gains, measured without the
# held-out GPUs (Hopper, L4, A100s, MI250 are neither fitted nor tuned on here).
#
#   tests/bench/serve_calibration.py --folds DIR [--exe build/neusight] [--gpus l40s,b200,rtx_pro_6000_server]
#                                    [--models llama32_3b,qwen3_8b] [--measured tpot,ttft,both]
#
# "Measured" serving phases are built from NVIDIA AIConfigurator's CUDA-graph kernel timings
# (../shared/data/aiconfigurator, see its README) of a GPU G: for a static batch of B prompts of I tokens (serve
# --batch B --input-len I --output-len 2: TTFT = the prefill, TPOT = one decode step at context I),
#   measured phase = the forecast − its GEMM and attention kernels' forecast + their measured times:
#   every bf16 GEMM (m, in, out) is gemm.csv's row (m, n = out, k = in); the lm_head's 128256 / 151936 outputs lie
#   beyond the data's 65536, so it is the 65536 row × out / 65536 (a decode-shaped GEMM streams its weights: linear
#   in n); prefill attention is context_attention.csv's row (batch, isl = I, heads, kv heads, head_dim); decode
#   attention over I + 1 cached tokens is generation_attention.csv's row with step = I − 1 (the data's steps are
#   2^k − 1: one token short, 0.2 % of a 512-token KV read). Repeated rows are averaged. The other kernels
#   (element-wise, norms, copies: 10–25 % of a step) keep their forecast, i.e. are taken as exact.
# Kernels: HF eager's (serve and predict `--kernels eager`), not serve's default, Megatron-LM's fused set (one QKV and
# one gate-up GEMM): the numbers in weights/ACCURACY.md were measured so, and Qwen3-8B's fused gate-up GEMM (24576
# outputs) lies outside AIConfigurator's GEMM grid. A calibration's factors are per kernel family, so a file fitted
# under one kernel set corrects the other's kernels of the same family.
# The predictor is the leave-one-GPU-out fold without G (DIR/<G's AIConfigurator name, spaces as _>/nvidia/
# {gemm_tc16,attention_prefill,attention_decode}, made by weights/train.sh --exclude-gpu G --exclude-gpu "NVIDIA
# A100-SXM4-80GB" --only gemm_tc16 --only attention_prefill --only attention_decode: the A100-SXM4 is held-out data,
# never trained on here; the other families are the shipped fp32 ones, which never saw G), and the calibration prior
# is the shipped error table without G's and the A100-SXM4's folds: G is an unseen GPU, as a user's would be. A copy
# of the GPU file gets the calibration (nothing is written in gpus/).
#
# Each configuration in turn is the one measurement (ttft_ms alone, tpot_ms alone, or both), and every other
# configuration of the same model on G is forecast again with the calibration file: mean absolute % error of TTFT and
# TPOT over those pairs, before (the raw forecast) and after.
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "weights"))
from held_out import held_out_matcher  # noqa: E402  (weights/held_out.py: the one list of held-out GPUs)

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AIC = os.path.join(SRC, "..", "shared", "data", "aiconfigurator")
RETRAINED = ("gemm_tc16", "attention_prefill", "attention_decode")
# neusight GPU stem → AIConfigurator folder, its device name, the GPU's name (its fold in the error table)
GPUS = {
    "l40s": ("l40s", "NVIDIA L40S", "L40S"),
    "b200": ("b200_sxm", "NVIDIA B200", "B200"),
    "rtx_pro_6000_server": ("rtx_pro_6000_server", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-Server"),
}
BATCHES = (1, 4, 16, 64)
INPUTS = (512, 2048)
GEMM_N_MAX = 65536
KERNELS = ["--kernels", "eager"]  # serve's, as predict's one-GPU default (the header: Kernels)
PREFILL_TOKENS_MAX = 32768  # batch x prompt: AIConfigurator's context attention has no larger shapes


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


class Measured:
    """AIConfigurator's bf16 kernel times of one GPU (ms), repeats averaged."""

    def __init__(self, folder):
        d = os.path.join(AIC, folder)
        acc = defaultdict(list)
        with open(os.path.join(d, "gemm.csv")) as f:
            for r in csv.DictReader(f):
                if r["gemm_dtype"] == "bfloat16":
                    acc[("gemm", int(r["m"]), int(r["n"]), int(r["k"]))].append(float(r["latency"]))
        for name, kind in (("context_attention.csv", "prefill"), ("generation_attention.csv", "decode")):
            with open(os.path.join(d, name)) as f:
                for r in csv.DictReader(f):
                    if (r["attn_dtype"], r["kv_cache_dtype"]) != ("bfloat16", "bfloat16") or r.get("window_size", "0") not in ("0", ""):
                        continue
                    if int(r["beam_width"]) != 1:
                        continue
                    key = (kind, int(r["batch_size"]), int(r["isl"]), int(r["step"]), int(r["num_heads"]),
                           int(r["num_key_value_heads"]), int(r["head_dim"]))
                    acc[key].append(float(r["latency"]))
        self.t = {k: mean(v) for k, v in acc.items()}

    def get(self, key):
        if key not in self.t:
            raise SystemExit(f"serve_calibration.py: no AIConfigurator row for {key}")
        return self.t[key]

    def op_ms(self, op):
        """The measured ms of one call of a GEMM / attention op of a neusight forecast, None for the others."""
        d = op["dims"]
        if op["op"] == "linear":  # neusight: (m, n = in) x (n, k = out); AIConfigurator: m, n = out, k = in
            m, din, dout = d["m"], d["n"], d["k"]
            if dout > GEMM_N_MAX:
                return d.get("b", 1) * self.get(("gemm", m, GEMM_N_MAX, din)) * dout / GEMM_N_MAX
            return d.get("b", 1) * self.get(("gemm", m, dout, din))
        if op["kind"] == "attention" and op["op"] == "sdpa":
            assert d["q_len"] == d["kv_len"], op
            return self.get(("prefill", d["batch"], d["q_len"], 0, d["heads"], d["kv_heads"], d["head_dim"]))
        if op["kind"] == "attention" and op["op"] == "decode_attention":
            assert d["q_len"] == 1, op
            return self.get(("decode", d["batch"], 1, d["kv_len"] - 2, d["heads"], d["kv_heads"], d["head_dim"]))
        if op["kind"] in ("gemm", "attention"):
            raise SystemExit(f"serve_calibration.py: unhandled {op['kind']} op {op['name']} ({op['op']})")
        return None


def run(exe, args, env=None):
    r = subprocess.run([exe] + args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"serve_calibration.py: {' '.join(args)}\n{r.stderr}")
    return r


def fold_install(tmp, exe, folds, gpu):
    """A neusight install whose data root has the fold weights: bin/neusight + share/neusight/{gpus,ops,scripts,weights}."""
    folder, device, name = GPUS[gpu]
    fold = os.path.join(folds, device.replace(" ", "_"), "nvidia")
    root = os.path.join(tmp, gpu)
    share = os.path.join(root, "share", "neusight")
    os.makedirs(os.path.join(root, "bin"))
    os.makedirs(os.path.join(share, "weights", "nvidia"))
    shutil.copy(exe, os.path.join(root, "bin", "neusight"))
    for d in ("gpus", "ops", "scripts"):
        os.symlink(os.path.join(SRC, d), os.path.join(share, d))
    for e in os.listdir(os.path.join(SRC, "weights")):
        if e != "nvidia":
            os.symlink(os.path.join(SRC, "weights", e), os.path.join(share, "weights", e))
    for e in os.listdir(os.path.join(SRC, "weights", "nvidia")):
        if e == "uncertainty.toml":
            continue
        src = os.path.join(fold, e) if e in RETRAINED else os.path.join(SRC, "weights", "nvidia", e)
        if e in RETRAINED and not os.path.isdir(src):
            raise SystemExit(f"serve_calibration.py: no fold weights {src} (weights/train.sh --exclude-gpu '{device}' "
                             f"--only gemm_tc16 --only attention_prefill --only attention_decode --out {os.path.dirname(fold)})")
        os.symlink(src, os.path.join(share, "weights", "nvidia", e))
    with open(os.path.join(share, "weights", "nvidia", "uncertainty.toml"), "w") as f:
        f.write(table_without(os.path.join(SRC, "weights", "nvidia", "uncertainty.toml"), name, held_out_once()))
    os.makedirs(os.path.join(root, "gpu"))
    gpu_file = os.path.join(root, "gpu", gpu + ".toml")
    shutil.copy(os.path.join(SRC, "gpus", gpu + ".toml"), gpu_file)
    return os.path.join(root, "bin", "neusight"), gpu_file, folder


def held_out_once(_made=[]):
    """weights/held_out.py's matcher, made once (it reads every gpus/*.toml), not per GPU and model."""
    if not _made:
        _made.append(held_out_matcher())
    return _made[0]


def table_without(path, name, held_out):
    """The leave-one-GPU-out error table without the folds of GPU `name` (the calibration prior must not know G) and
    of any held-out evaluation GPU (held_out: weights/held_out.py's matcher; weights/HELD_OUT is never fitted on), and
    without them among the training GPUs of each family's range (`gpus`: G is unseen by the fold's weights)."""
    with open(path, "rb") as f:
        t = tomllib.load(f)
    out = [f"format_version = {t['format_version']}", f"vendor = \"{t['vendor']}\"", "levels = " + json.dumps(t["levels"])]
    for fam, e in t["families"].items():
        keep = [i for i, g in enumerate(e["folds"]) if g != name and not held_out(g)]
        out.append(f"[families.{fam}]")
        for k, v in e.items():
            if k == "range":
                continue
            if k in ("folds", "fold_rows", "outside", "quantiles"):
                v = [v[i] for i in keep]
            out.append(f"{k} = " + json.dumps(v))
        if "range" in e:
            out.append(f"[families.{fam}.range]")
            for k, v in e["range"].items():
                if k == "gpus":  # for the record: uncertainty.lua trained_on reads the fold weights' manifests
                    v = [g for g in v if g != name and not held_out(g)]  # (training.gpus), which never name G
                out.append(f"{k} = " + json.dumps(v))
    return "\n".join(out) + "\n"


def measured_phase(exe, model, gpu_file, meas, mode, b, i, env):
    """One phase of a static batch of b prompts of i tokens (mode prefill: the prompts; decode: one step at context i),
    bf16 with CUDA graphs, uncalibrated: (measured ms, `neusight predict --format json`'s forecast), measured = the
    forecast with every GEMM and attention kernel's forecast replaced by meas's (a Measured) time for its shape.
    serve_band.py's phases are these too."""
    args = ["predict", "--model", model, "--gpu", gpu_file, "--mode", mode, "--batch", str(b), "--dtype", "bf16",
            "--launch", "graph", "--no-calibration", "--format", "json"]  # HF eager kernels: serve's KERNELS
    args += ["--seq", str(i)] if mode == "prefill" else ["--context", str(i)]
    j = json.loads(run(exe, args, env).stdout)
    total = j["latency_ms"]
    for op in j["ops"]:
        m = meas.op_ms(op)
        if m is not None:
            total += op["count"] * m - op["ms"]
    return total, j


def bench(exe0, folds, gpu, model, tmp, verbose, hows=("tpot", "ttft", "both")):
    exe, gpu_file, folder = fold_install(os.path.join(tmp, model), exe0, folds, gpu)
    meas = Measured(folder)
    configs = [(b, i) for b in BATCHES for i in INPUTS]
    env = dict(os.environ, NEUSIGHT_NO_CACHE="1")
    cal = gpu_file.replace(".toml", ".calibration.toml")

    def forecast(b, i):
        j = json.loads(run(exe, ["serve", "--model", model, "--gpu", gpu_file, "--batch", str(b), "--input-len", str(i),
                                 "--output-len", "2", "--format", "json"] + KERNELS, env).stdout)
        return j["ttft_ms"], j["tpot_ms"]

    def phase(mode, b, i):  # (measured, forecast) ms
        total, j = measured_phase(exe, model, gpu_file, meas, mode, b, i, env)
        return total, j["latency_ms"]

    truth, raw = {}, {}
    for b, i in configs:
        ttft, tp = forecast(b, i)
        mt, ft = (phase("prefill", b, i) if b * i <= PREFILL_TOKENS_MAX else (None, None))
        md, fd = phase("decode", b, i)
        assert ft is None or abs(ft - ttft) < 1e-9 * ttft and abs(fd - tp) < 1e-9 * tp, (ft, ttft, fd, tp)
        truth[(b, i)] = (mt, md)
        raw[(b, i)] = (ttft, tp)
        if verbose:
            print(f"<!-- {gpu} {model} batch {b} input {i}: TTFT forecast {ttft:.3f} measured "
                  f"{'-' if mt is None else format(mt, '.3f')} ms; TPOT forecast {tp:.3f} measured {md:.3f} ms -->")
    rows = []
    for how in hows:
        ape = {"ttft": ([], []), "tpot": ([], [])}
        for src in configs:
            mt, md = truth[src]
            if how != "tpot" and mt is None:
                continue
            text = ""
            if how in ("ttft", "both"):
                text += f"ttft_ms = {mt!r}\n"
            if how in ("tpot", "both"):
                text += f"tpot_ms = {md!r}\n"
            m_file = os.path.join(tmp, model, "m.toml")
            with open(m_file, "w") as f:
                f.write(text)
            run(exe, ["serve", "--model", model, "--gpu", gpu_file, "--batch", str(src[0]), "--input-len", str(src[1]),
                      "--output-len", "2", "--calibrate", m_file, "--format", "json"] + KERNELS, env)
            for c in configs:
                if c == src:
                    continue
                after = forecast(*c)
                for k, phase in ((0, "ttft"), (1, "tpot")):
                    if truth[c][k] is None:
                        continue
                    ape[phase][0].append(abs(raw[c][k] / truth[c][k] - 1) * 100)
                    ape[phase][1].append(abs(after[k] / truth[c][k] - 1) * 100)
            os.remove(cal)
        rows.append((how, len(ape["tpot"][0]), mean(ape["ttft"][0]), mean(ape["ttft"][1]), mean(ape["tpot"][0]),
                     mean(ape["tpot"][1])))
    bias = [(raw[c][1] / truth[c][1] - 1) * 100 for c in configs]
    bias_t = [(raw[c][0] / truth[c][0] - 1) * 100 for c in configs if truth[c][0] is not None]
    return rows, mean(bias_t), mean(bias)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folds", required=True, help="folder of weights/train.sh --exclude-gpu outputs, one per GPU")
    ap.add_argument("--exe", default=os.path.join(SRC, "build", "neusight"))
    ap.add_argument("--gpus", default=",".join(GPUS))
    ap.add_argument("--models", default="llama32_3b,qwen3_8b")
    ap.add_argument("-v", "--verbose", action="store_true", help="also each configuration's forecast and measurement")
    ap.add_argument("--measured", default="tpot,ttft,both",
                    help="which measurements calibrate, in turn (tpot: tpot_ms alone, ttft: ttft_ms alone, both)")
    a = ap.parse_args()
    exe = os.path.abspath(a.exe)
    print("| GPU (held out of the predictor) | model | measured | pairs | TTFT MAPE before → after | TPOT MAPE before → after |")
    print("| --- | --- | --- | ---: | --- | --- |")
    totals = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="servecal-") as tmp:
        for gpu in a.gpus.split(","):
            for model in a.models.split(","):
                rows, bias_t, bias_d = bench(exe, os.path.abspath(a.folds), gpu, model, os.path.join(tmp, gpu), a.verbose,
                                             a.measured.split(","))
                for how, n, t0, t1, d0, d1 in rows:
                    print(f"| {gpu} | {model} | {how} | {n} | {t0:.1f} → {t1:.1f} | {d0:.1f} → {d1:.1f} |")
                    totals[how].append((n, t0, t1, d0, d1))
                print(f"<!-- {gpu} {model}: raw forecast vs measured, mean signed error TTFT {bias_t:+.1f} %, "
                      f"TPOT {bias_d:+.1f} % -->")
                sys.stdout.flush()
    for how, cells in totals.items():  # every cell has the same number of pairs: the plain mean of the cells
        t0, t1, d0, d1 = (mean(c[k] for c in cells) for k in range(1, 5))
        print(f"| **all ({len(cells)} GPU x model)** | | {how} | {sum(c[0] for c in cells)} | **{t0:.1f} → {t1:.1f}** | "
              f"**{d0:.1f} → {d1:.1f}** |")


if __name__ == "__main__":
    main()
