#!/usr/bin/env python3
"""tests/fuzz/mutate.py — a seeded mutation fuzzer for the inputs libFuzzer does not reach: Lua workloads, op rules
(--ops DIR) and label / measurement files (eval, scale --trace, predict/serve --calibrate).

Usage (from the repository root, after building build/neusight):
    python3 tests/fuzz/mutate.py --target workload --seed 1 --count 1000
    python3 tests/fuzz/mutate.py --target all --seed 7 --count 500 --keep /tmp/fuzz-findings
    python3 tests/fuzz/mutate.py --target oprule --seed 3 --case 17      # rerun one case, print its input and output

Targets: workload, oprule, label (all = each in turn). A run is deterministic for a given --seed and --count: case i
of a target is generated from Random(f"{seed}:{target}:{i}") alone, so --case i reproduces it.

Each case writes a mutated input into a fresh temp folder, runs `neusight …` under `timeout` (--timeout, default 20 s)
with `--format json -o OUT`, and classifies the run:
    crash         killed by a signal (SIGSEGV, SIGABRT …)
    hang          ran past the timeout
    internal      exit != 0 with "unprotected", "internal error", "terminate called", "std::" or a Lua runtime error
                  raised inside the engine's own scripts (scripts/neusight/… or ops/… : attempt to …)
    left_output   exit != 0 and OUT exists
    no_location   exit != 0 and the message names neither the input file with a line ("file.lua:12") nor, for a
                  file without lines (JSON), the file — soft: reported, read each one
    nonsense      exit 0 and a latency/time/ms figure in OUT is null (NaN/inf), negative, or the total is 0
    accepted_typo exit 0 although the mutation misspelled or added a key (a key no reader knows should be an error)
    accepted_bad  exit 0 although the mutation put NaN/inf/a negative/huge number or a wrong type somewhere — soft:
                  many values are legitimate somewhere (a negative attrs value, 0 dropout); read each one
    ok            exit != 0 with a located message, or exit 0 on an unremarkable input
Findings (all but ok) are printed one line each and, with --keep DIR, their inputs and outputs are copied there.
The binary is --bin (default build/neusight); it is run with `nice`.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Lua:
    """A raw Lua expression (code, or a value Python cannot spell)."""

    def __init__(self, src, bad=True):
        self.src, self.bad = src, bad

    def __repr__(self):
        return self.src


def lua_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_lua(v, ind=0):
    pad = "  " * (ind + 1)
    if isinstance(v, Lua):
        return v.src
    if v is True or v is False:
        return "true" if v else "false"
    if v is None:
        return "nil"
    if isinstance(v, str):
        return lua_str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, list):
        return "{ " + ", ".join(to_lua(x, ind + 1) for x in v) + " }"
    if isinstance(v, dict):
        if not v:
            return "{}"
        keys = list(v.keys())
        items = []
        for k in keys:
            key = k if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k) else "[" + lua_str(k) + "]"
            items.append(pad + key + " = " + to_lua(v[k], ind + 1) + ",")
        return "{\n" + "\n".join(items) + "\n" + "  " * ind + "}"
    raise TypeError(type(v))


# Replacement values: (Lua source, JSON/TOML/CSV text where one exists). Numbers first.
BAD_NUMBERS = ["0/0", "math.huge", "-math.huge", "1e308", "-1", "0", "0.5", "1.5", "-0.0", "2^53", "2^62",
               "math.maxinteger", "math.mininteger", "1e-300", "3", "1e9", "-2^31", "7.0"]
BAD_OTHER = ['""', '"x"', '"nan"', '"1"', "{}", "{ 1 }", "{ x = 1 }", "true", "false", "function() end",
             "setmetatable({}, { __index = function() error('meta boom') end })", '("x"):rep(300)', "{ {}, {} }"]


def bad_value(rng):
    return Lua(rng.choice(BAD_NUMBERS) if rng.random() < 0.6 else rng.choice(BAD_OTHER))


def misspell(rng, key):
    ops = []
    if len(key) > 2:
        ops += ["drop", "swap"]
    ops += ["double", "upper", "suffix"]
    op = rng.choice(ops)
    i = rng.randrange(len(key))
    if op == "drop":
        out = key[:i] + key[i + 1:]
    elif op == "swap" and i < len(key) - 1:
        out = key[:i] + key[i + 1] + key[i] + key[i + 2:]
    elif op == "double":
        out = key[:i] + key[i] + key[i:]
    elif op == "upper":
        out = key.upper() if key != key.upper() else key + "s"
    else:
        out = key + "s"
    return out if out != key else key + "_x"


def paths(tree, prefix=()):
    """Every (path, value) in a dict/list tree, tables included; Lua leaves are leaves."""
    out = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.append((prefix + (k,), v))
            out += paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.append((prefix + (i,), v))
            out += paths(v, prefix + (i,))
    return out


def get_parent(tree, path):
    for p in path[:-1]:
        tree = tree[p]
    return tree


def mutate_tree(rng, tree, kinds, protect=()):
    """One mutation of a dict/list tree in place; returns (description, class) with class typo|bad|drop|other."""
    cands = [(p, v) for p, v in paths(tree) if not any(p[:len(q)] == q for q in protect)]
    path, val = rng.choice(cands)
    parent = get_parent(tree, path)
    key = path[-1]
    where = ".".join(str(p) for p in path)
    kind = rng.choice(kinds)
    if isinstance(parent, list) and kind in ("typo", "extra"):
        kind = "value"
    if kind == "value":
        new = bad_value(rng)
        parent[key] = new
        return "%s = %s" % (where, new.src), "bad"
    if kind == "drop":
        if isinstance(parent, list):
            parent.pop(key)
        else:
            del parent[key]
        return "drop %s" % where, "drop"
    if kind == "typo":
        nk = misspell(rng, key)
        if nk in parent:
            nk += "_x"
        items = list(parent.items())
        parent.clear()
        for k, v in items:
            parent[nk if k == key else k] = v
        return "rename %s -> %s" % (where, nk), "typo"
    if kind == "extra":
        nk = rng.choice(["extra", "unknown_field", "colour", misspell(rng, key)])
        if nk in parent:
            nk += "_x"
        parent[nk] = Lua(rng.choice(["1", '"x"', "true", "{}"]))
        return "add %s.%s" % (".".join(str(p) for p in path[:-1]) or "<top>", nk), "typo"
    if kind == "nest":
        parent[key] = [val] if not isinstance(val, (dict, list)) else {"x": val}
        return "wrap %s in a table" % where, "bad"
    if kind == "dup" and isinstance(parent, list):
        parent.insert(key, json.loads(json.dumps(val, default=lambda o: None)) if not isinstance(val, Lua) else val)
        return "duplicate %s" % where, "other"
    new = bad_value(rng)
    parent[key] = new
    return "%s = %s" % (where, new.src), "bad"


###################################################################################################### workloads

SMALL_GPT = {"name": "tiny_gpt", "arch": "gpt", "n_layer": 2, "n_embd": 256, "n_head": 4, "vocab_size": 1000,
             "n_positions": 512}
SMALL_LLAMA = {"name": "tiny_llama", "arch": "llama", "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256,
               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}
SMALL_MOE = {"name": "tiny_moe", "arch": "moe", "model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 256,
             "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
             "num_local_experts": 4, "num_experts_per_tok": 2}
SMALL_BERT = {"name": "tiny_bert", "arch": "bert", "num_hidden_layers": 2, "hidden_size": 256,
              "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 512,
              "type_vocab_size": 2, "hidden_act": "gelu"}
SMALL_DEEPSEEK = {"name": "tiny_deepseek", "arch": "deepseek", "model_type": "deepseek_v2", "vocab_size": 1000,
                  "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 128, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 4, "n_shared_experts": 1, "n_routed_experts": 8,
                  "routed_scaling_factor": 1.0, "kv_lora_rank": 64, "q_lora_rank": False, "qk_rope_head_dim": 16,
                  "v_head_dim": 32, "qk_nope_head_dim": 32, "topk_method": "greedy", "n_group": 1, "topk_group": 1,
                  "num_experts_per_tok": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1, "norm_topk_prob": False,
                  "hidden_act": "silu", "tie_word_embeddings": False}
SMALL_OPT = {"name": "tiny_opt", "arch": "opt", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
             "ffn_dim": 1024, "word_embed_proj_dim": 256, "activation_function": "relu", "do_layer_norm_before": True,
             "vocab_size": 1000, "max_position_embeddings": 512}
NODES = [
    {"op": "linear", "name": "fc1", "inputs": [[8, 128, 256]], "output": [8, 128, 1024], "params": 263168},
    {"op": "gelu", "name": "act", "inputs": [[8, 128, 1024]], "output": [8, 128, 1024]},
    {"op": "linear", "name": "fc2", "inputs": [[8, 128, 1024]], "output": [8, 128, 256], "params": 262400},
    {"op": "layernorm", "name": "ln", "inputs": [[8, 128, 256]], "output": [8, 128, 256], "params": 512},
]


def workload_bases():
    return [
        {"description": "gpt2 inference", "model": "gpt2_large", "gpu": "A100-PCIE-40GB", "mode": "inference",
         "batch": 4, "seq": 128},
        {"model": dict(SMALL_GPT), "gpu": "H100-SXM5-80GB", "mode": "train", "batch": 8, "seq": 256,
         "optimizer": "adamw", "dtype": "bf16", "precision": "amp", "attention": "sdpa", "loss": True},
        {"model": dict(SMALL_LLAMA), "gpu": "h100", "mode": "decode", "batch": 4, "context": 512,
         "kv_dtype": "fp8", "weight_dtype": "int4", "dtype": "fp16", "launch": "graph"},
        {"model": dict(SMALL_LLAMA), "gpu": "h100", "mode": "prefill", "batch": 2, "seq": 256, "dtype": "bf16"},
        {"model": dict(SMALL_MOE), "gpu": "h100", "mode": "train", "batch": 8, "seq": 128, "dtype": "bf16",
         "experts": "grouped", "router_skew": 1.5, "optimizer": "adam", "optimizer_impl": "fused",
         "parallel": {"dp": 2, "ep": 2}},
        {"model": dict(SMALL_BERT), "gpu": "A100-PCIE-40GB", "mode": "train", "batch": 8, "seq": 128, "optimizer": "sgd"},
        {"model": dict(SMALL_GPT), "gpu": "A100-PCIE-40GB", "mode": "inference", "batch": 8, "seq": 128,
         "fusion": {"flash_attention": True}},
        {"model": "gpt3_175b", "gpu": "H100-SXM5-80GB", "mode": "train", "batch": 64, "seq": 2048, "dtype": "bf16",
         "optimizer": "adam",
         "parallel": {"dp": 1, "tp": 8, "pp": 8, "microbatches": 64, "schedule": "interleaved", "virtual_stages": 2,
                      "recompute": "full",
                      "cluster": {"gpus_per_node": 8, "nodes": 8,
                                  "inter": {"bw_gbps": 50, "latency_us": 5, "efficiency": 0.8}}}},
        {"model": "gpt2_med", "gpu": "h100", "mode": "train", "batch": 8, "seq": 512, "optimizer": "adamw",
         "parallel": {"dp": 4, "bucket_mb": 25, "sequence_parallel": False}},
        {"model": dict(SMALL_DEEPSEEK), "gpu": "h100", "mode": "decode", "batch": 8, "context": 256, "dtype": "bf16",
         "experts": "grouped", "kv_dtype": "fp8"},
        {"model": dict(SMALL_OPT), "gpu": "A100-PCIE-40GB", "mode": "train", "batch": 8, "seq": 256, "optimizer": "adamw",
         "precision": "amp", "dtype": "fp16", "parallel": {"dp": 2, "pp": 2, "microbatches": 4, "schedule": "1f1b"}},
        {"model": "__NODES__", "gpu": "H100-SXM5-80GB", "mode": "train", "batch": 8, "seq": 128, "optimizer": "sgd",
         "__nodes__": [json.loads(json.dumps(n)) for n in NODES]},
    ]


def workload_text(w):
    w = dict(w)
    nodes = w.pop("__nodes__", None)
    # the function model stands where the base has "__NODES__"; a mutated or dropped model keeps its mutation (it
    # used to be put back, so "model = 7.0" ran the base unchanged and was reported as accepted)
    if nodes is not None and w.get("model") == "__NODES__":
        w["model"] = Lua("function(opts)\n    return " + to_lua(nodes, 2) + ", \"mlp\"\n  end")
    return "-- fuzzed workload\nreturn " + to_lua(w) + "\n"


MUTATIONS = 1  # mutations per workload case (--mutations)


def gen_workload(rng, tmp):
    bases = workload_bases()
    w = rng.choice(bases)
    descs, classes = [], []
    for _ in range(MUTATIONS):
        d, c = mutate_tree(rng, w, ["value", "value", "value", "drop", "typo", "extra", "nest"],
                           protect=(("__nodes__",),) if rng.random() < 0.5 else ())
        descs.append(d)
        classes.append(c)
    path = os.path.join(tmp, "work.lua")
    with open(path, "w") as f:
        f.write(workload_text(w))
    return {"input": path, "args": ["run", path], "desc": "; ".join(descs), "classes": classes, "lines": True}


###################################################################################################### op rules

KERNELS = {
    "memory": {"kind": "memory", "name": "MEM", "flops": 0, "bytes": 1000000},
    "gemm": {"kind": "gemm", "name": "Linear", "b": 1, "m": 512, "n": 256, "k": 64, "flops": 2 * 512 * 256 * 64,
             "bytes": 4 * (512 * 64 + 64 * 256 + 512 * 256), "dtype": "fp32"},
    "bmm": {"kind": "bmm", "name": "BMM", "b": 8, "m": 128, "n": 128, "k": 64, "flops": 2 * 8 * 128 * 128 * 64,
            "bytes": 4 * 8 * (128 * 64 * 2 + 128 * 128)},
    "elementwise": {"kind": "elementwise", "name": "VECadd", "op": "add", "rows": 512, "hidden": 64,
                    "flops": 512 * 64, "bytes": 3 * 4 * 512 * 64},
    "softmax": {"kind": "softmax", "name": "VECsoftmax", "rows": 512, "hidden": 128, "flops": 5 * 512 * 128,
                "bytes": 2 * 4 * 512 * 128},
    "layernorm": {"kind": "layernorm", "name": "VECln", "rows": 512, "hidden": 64, "flops": 8 * 512 * 64,
                  "bytes": 2 * 4 * 512 * 64},
    "attention": {"kind": "attention", "name": "FlashAttention", "op": "causal", "b": 4, "m": 128, "n": 128, "k": 64,
                  "rows": 4, "hidden": 4, "flops": 4 * 4 * 128 * 128 * 64, "bytes": 4 * 4 * 4 * 128 * 64 * 4,
                  "dtype": "bf16"},
    "collective": {"kind": "collective", "name": "AllReduce", "flops": 0, "bytes": 1000000, "seconds": 0.001},
}

# Rules built with the constructors of neusight.rules / neusight.kernels (the per-element paths)
CTOR_RULES = [
    ('require("neusight.rules").elementwise', {"name": "mine", "doc": "d", "op": "add", "grad": "mem"}),
    ('require("neusight.rules").activation', {"name": "mine", "doc": "d", "op": "silu", "grad": "silu_bwd"}),
    ('require("neusight.rules").memory', {"name": "mine", "doc": "d"}),
    ('require("neusight.rules").linear', {"name": "mine", "doc": "d"}),
]
VEC_CALLS = [
    ("vec", ["add", 512, 64, "fp32", {"bytes_per_elem": 12}]),
    ("vec", ["gelu", 512, 64, "bf16", {"bytes": 65536}]),
    ("softmax", [512, 128, "fp32"]),
    ("layernorm", [512, 64, "fp16"]),
    ("mem", [[[4, 128, 64], [4, 128, 64]], "fp32"]),
]

RUN_NODE = {"op": "mine", "name": "n1", "inputs": [[4, 128, 64]], "output": [4, 128, 64]}


def rule_text(rule):
    r = dict(rule)
    for field in ("forward", "backward"):
        if field in r and isinstance(r[field], list):
            r[field] = Lua("function(node, gpu)\n    return " + to_lua(r[field], 2) + "\n  end")
    return "return " + to_lua(r) + "\n"


def gen_oprule(rng, tmp):
    train = rng.random() < 0.5
    node = json.loads(json.dumps(RUN_NODE))
    style = rng.random()
    descs, classes = [], []
    if style < 0.55:  # a hand-written rule returning kernel tables
        fw = [json.loads(json.dumps(KERNELS[k])) for k in rng.sample(sorted(KERNELS), rng.choice([1, 1, 2]))]
        rule = {"name": "mine", "doc": "d", "forward": fw}
        if train:
            rule["backward"] = [json.loads(json.dumps(KERNELS[rng.choice(sorted(KERNELS))]))]
        else:
            rule["backward"] = False
        tree, protect = rule, ()
        text = lambda: rule_text(rule)
        target = rule
    elif style < 0.8:  # kernels from neusight.kernels constructors
        fn, args = rng.choice(VEC_CALLS)
        target = json.loads(json.dumps(args))

        def text():
            call = 'require("neusight.kernels").%s(%s)' % (fn, ", ".join(to_lua(a, 2) for a in target))
            bw = "false" if not train else "function(node) return { %s } end" % call
            return ('return {\n  name = "mine",\n  doc = "d",\n  backward = %s,\n  forward = function(node, gpu)\n'
                    '    return { %s }\n  end,\n}\n') % (bw, call)
        protect = ()
    else:  # a rule from a constructor
        ctor, spec = rng.choice(CTOR_RULES)
        target = dict(spec)

        def text():
            return "return " + ctor + " " + to_lua(target) + "\n"
        protect = (("name",),)
    # mutate the rule or (a quarter of the time) the node that calls it
    if rng.random() < 0.25:
        d, c = mutate_tree(rng, node, ["value", "value", "drop", "typo", "nest", "dup"])
        descs.append("node: " + d)
    else:
        if not paths(target):
            target["x"] = 1
        d, c = mutate_tree(rng, target, ["value", "value", "value", "drop", "typo", "extra", "nest", "dup"],
                           protect=protect)
        descs.append(d)
    classes.append(c)
    ops = os.path.join(tmp, "ops")
    os.makedirs(ops)
    rule_path = os.path.join(ops, "mine.lua")
    with open(rule_path, "w") as f:
        f.write(text())
    run = {"gpu": "h100", "mode": "train" if train else "inference", "batch": 4, "seq": 128,
           "model": Lua("function(opts)\n    return { " + to_lua(node, 2) + " }\n  end")}
    run_path = os.path.join(tmp, "run.lua")
    with open(run_path, "w") as f:
        f.write("return " + to_lua(run) + "\n")
    mutated = run_path if descs[0].startswith("node:") else rule_path
    return {"input": mutated, "args": ["run", run_path, "--ops", ops], "desc": ("train " if train else "") + descs[0],
            "classes": classes, "lines": True}


###################################################################################################### labels

JSON_BAD = ["NaN", "-1", "0", "1e300", "1e-300", '"x"', '""', "null", "[]", "{}", "true", "36.5", "-0.0", "1e999",
            "9007199254740993", "2505.2"]
CSV_BAD = ["nan", "inf", "-1", "0", "1e308", "1e-300", "", "x", "0x10", "-0.0", "1e9", "1,5", "\"(4, -1)\"",
           "\"(0,)\"", "\"()\"", "\"(4096, 3840, 0)\"", "NaN", "+1", " 1", "1e", "9999999999999999999"]
TOML_BAD = ["nan", "inf", "-inf", "-1", "0", "1e308", "1e-300", '"x"', '""', "[]", "{}", "true", "0x10", "1_000",
            "+3", "3", "3.5", "1e9", "1e10"]


def mutate_flat(rng, op, raw, k, bad_values, extra_names):
    """Mutation `op` (value, drop, typo, extra) of key `k` of a flat key → value-text table; (table, desc, class)."""
    if op == "value":
        raw[k] = rng.choice(bad_values)
        return raw, "%s = %s" % (k, raw[k]), "bad"
    if op == "drop":
        del raw[k]
        return raw, "drop " + k, "drop"
    if op == "typo":
        nk = misspell(rng, k)
        return {(nk if kk == k else kk): v for kk, v in raw.items()}, "rename %s -> %s" % (k, nk), "typo"
    raw[rng.choice(extra_names)] = "1"
    return raw, "add a key", "typo"


def gen_label(rng, tmp):
    which = rng.choice(["json", "json", "csv", "csv", "csv", "meas_predict", "meas_serve"])
    if which == "json":
        d = os.path.join(tmp, "label", "Tesla_T4")
        os.makedirs(d)
        p = os.path.join(d, "gpt2_large-inf-1024-4.json")
        src = open(os.path.join(ROOT, "tests/fixtures/neusight/label/Tesla_T4/gpt2_large-inf-1024-4.json")).read()
        keys = ["num_layer", "e2e_latency", "fw_latency", "bwall_latency"]
        vals = {k: v for k, v in json.loads(src).items()}
        op = rng.choice(["value", "value", "value", "drop", "typo", "extra", "text"])
        if op == "text":
            text = json.dumps(vals, indent=4)
            i = rng.randrange(len(text))
            text = text[:i] + rng.choice(["", ",", "}", "\"", "0", "\n"]) + text[i + rng.randrange(3):]
            desc, cls = "byte edit at %d" % i, "other"
        else:
            k = rng.choice(keys)
            raw, desc, cls = mutate_flat(rng, op, {kk: json.dumps(v) for kk, v in vals.items()}, k, JSON_BAD,
                                         ["e2e_latency_ms", "extra", "fw_latncy"])
            text = "{\n" + ",\n".join('    "%s": %s' % (kk, v) for kk, v in raw.items()) + "\n}\n"
        with open(p, "w") as f:
            f.write(text)
        return {"input": p, "desc": "label json: " + desc, "classes": [cls], "lines": False,
                "args": ["eval", "models", p, "--graphs", os.path.join(ROOT, "tests/fixtures/neusight/opgraph"),
                         "--predictor", "roofline"]}
    if which == "csv":
        d = os.path.join(tmp, "label", "Tesla_T4")
        os.makedirs(d)
        p = os.path.join(d, "gpt2_large-inf-1024-4.csv")
        lines = open(os.path.join(ROOT, "tests/fixtures/neusight/label/Tesla_T4/gpt2_large-inf-1024-4.csv")).read() \
            .split("\n")
        header = lines[0].split(",")
        op = rng.choice(["cell", "cell", "cell", "cell", "droprow", "duprow", "header"])
        i = rng.randrange(1, len(lines) - 1)
        if op == "cell":
            # a naive split is enough for the numeric tail columns: latency … output_shape
            row = lines[i]
            m = re.match(r"^(.*),(True|False),([^,]*),([^,]*),([^,]*),([^,]*),(\"[^\"]*\"|[^,]*),([^,]*),([^,]*)$", row)
            if not m:
                return gen_label(rng, tmp)
            parts = list(m.groups())
            col = rng.choice([2, 3, 4, 5, 6, 7])
            names = {2: "latency", 3: "fw_latency", 4: "bw_latency", 5: "acc_latency", 6: "output_shape", 7: "dtype"}
            parts[col] = rng.choice(CSV_BAD)
            lines[i] = ",".join(parts)
            desc, cls = "row %d %s = %s" % (i + 1, names[col], parts[col]), "bad"
        elif op == "droprow":
            del lines[i]
            desc, cls = "drop row %d" % (i + 1), "drop"
        elif op == "duprow":
            lines.insert(i, lines[i])
            desc, cls = "duplicate row %d" % (i + 1), "other"
        else:
            j = rng.randrange(len(header))
            header[j] = misspell(rng, header[j])
            lines[0] = ",".join(header)
            desc, cls = "header column %d -> %s" % (j + 1, header[j]), "typo"
        with open(p, "w") as f:
            f.write("\n".join(lines))
        return {"input": p, "desc": "label csv: " + desc, "classes": [cls], "lines": True,
                "args": ["scale", "--trace", p, "--from", "t4", "--to", "l4", "--graph",
                         os.path.join(ROOT, "tests/fixtures/neusight/opgraph/gpt2_large-inf-1024-4.csv")]}
    # measurement TOML for predict --calibrate / serve --calibrate, the GPU a copy of the corpus's good one
    gpu = os.path.join(tmp, "good.toml")
    shutil.copy(os.path.join(ROOT, "tests/bad_inputs/gpu/good.toml"), gpu)
    p = os.path.join(tmp, "meas.toml")
    if which == "meas_predict":
        keys = {"latency_ms": "3.5", "note": '"x"'}
        args = ["predict", "--model", "gpt2_large", "--mode", "inference", "--batch", "1", "--seq", "8",
                "--predictor", "roofline", "--gpu", gpu, "--calibrate", p]
    else:
        keys = {"ttft_ms": "3", "tpot_ms": "1.5", "note": '"x"'}
        args = ["serve", "--model", "gpt2_med", "--batch", "2", "--input-len", "16", "--output-len", "4",
                "--predictor", "roofline", "--gpu", gpu, "--calibrate", p]
    op = rng.choice(["value", "value", "value", "drop", "typo", "extra"])
    keys, desc, cls = mutate_flat(rng, op, keys, rng.choice(sorted(keys)), TOML_BAD, ["extra", "latency", "ttft", "e2e_ms"])
    with open(p, "w") as f:
        f.write("".join("%s = %s\n" % kv for kv in keys.items()))
    return {"input": p, "desc": which + ": " + desc, "classes": [cls], "lines": True, "args": args}


GENERATORS = {"workload": gen_workload, "oprule": gen_oprule, "label": gen_label}

###################################################################################################### running

INTERNAL = re.compile(r"unprotected|internal error|terminate called|std::|Assertion|sanitizer|"
                      r"(scripts/[\w/]+\.lua|engine/lua/\w+\.lua|[^\w/]ops/(?!mine)\w+\.lua):\d+: (attempt to|bad argument)|"
                      r"stack overflow|number has no integer representation|C stack overflow")
TIME_KEY = re.compile(r"(^|_)(ms|latency|time|seconds|us|s)($|_)|latency|_ms")


def scan_json(doc):
    """Non-finite (null) or negative time figures, and a zero total."""
    bad = []

    def walk(v, path):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, path + [k])
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, path + [str(i)])
        else:
            key = path[-1] if path else ""
            if not TIME_KEY.search(key) or key.endswith("_gb"):
                return
            # null by design: a band the predictor has not, a measurement the file does not give
            if v is None and not re.search(r"_p\d+$|band|^measured_|^calibrated_", key):
                bad.append("%s is null" % ".".join(path))
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                if not math.isfinite(v) or v < 0:
                    bad.append("%s = %r" % (".".join(path), v))

    walk(doc, [])
    if isinstance(doc, dict):
        for k in ("latency_ms", "iteration_ms", "total_ms"):
            if k in doc and doc[k] == 0:
                bad.append("%s = 0" % k)
    return bad


def classify(case, rc, out, err, out_path):
    name = os.path.basename(case["input"])
    if rc == 124 or rc == 137:
        return "hang", "timeout"
    if rc < 0 or rc > 128:
        return "crash", "signal %d" % (-rc if rc < 0 else rc - 128)
    text = out + err
    if rc != 0:
        m = INTERNAL.search(text)
        if m:
            return "internal", m.group(0)
        if os.path.exists(out_path):
            return "left_output", out_path
        # a workload field's error names the file only: the engine gets the returned table's values, not their lines
        if case["lines"] == "strict":
            located = re.search(re.escape(name) + r":\d+", text)
        else:
            located = name in text
        if not located:
            return "no_location", err.strip().split("\n")[0][:200]
        return "ok", ""
    # exit 0
    try:
        with open(out_path) as f:
            doc = json.load(f)
    except Exception as e:  # noqa: BLE001
        return "nonsense", "unreadable JSON: %s" % e
    bad = scan_json(doc)
    if bad:
        return "nonsense", "; ".join(bad[:4])
    if "typo" in case["classes"]:
        return "accepted_typo", ""
    if "bad" in case["classes"]:
        return "accepted_bad", ""
    return "ok", ""


def run_case(args, target, i, keep, verbose):
    rng = random.Random("%d:%s:%d" % (args.seed, target, i))
    tmp = tempfile.mkdtemp(prefix="nsfuzz_")
    try:
        case = GENERATORS[target](rng, tmp)
        out_path = os.path.join(tmp, "out.json")
        cmd = ["nice", "timeout", "-s", "KILL", str(args.timeout), args.bin] + case["args"] + \
              ["--format", "json", "-o", out_path]
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, errors="replace")
        rc = p.returncode
        if rc == -9:
            rc = 137
        cls, why = classify(case, rc, p.stdout, p.stderr, out_path)
        if verbose:
            print("$ " + " ".join(cmd))
            print(open(case["input"]).read())
            print("rc=%d\n%s%s" % (rc, p.stdout[-3000:], p.stderr[-3000:]))
        if cls != "ok" and keep:
            dst = os.path.join(keep, "%s-%s-%04d" % (cls, target, i))
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(tmp, dst)
            with open(os.path.join(dst, "RUN.txt"), "w") as f:
                f.write("%s\n%s\nrc=%d\n%s\n%s\n" % (case["desc"], " ".join(cmd), rc, p.stdout, p.stderr))
        return cls, why, case["desc"], (p.stderr.strip().split("\n") or [""])[-1][:160]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="all", choices=sorted(GENERATORS) + ["all"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=200, help="cases per target")
    ap.add_argument("--case", type=int, help="run only case N (verbose)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "neusight"))
    ap.add_argument("--timeout", type=int, default=20)
    ap.add_argument("--keep", help="copy each finding's folder here")
    ap.add_argument("--show-ok", action="store_true", help="print every case, not only findings")
    ap.add_argument("--mutations", type=int, default=1, help="mutations per workload case (default 1)")
    args = ap.parse_args()
    global MUTATIONS
    MUTATIONS = args.mutations
    targets = sorted(GENERATORS) if args.target == "all" else [args.target]
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    total = {}
    for t in targets:
        counts = {}
        ids = [args.case] if args.case is not None else range(args.count)
        for i in ids:
            cls, why, desc, last = run_case(args, t, i, args.keep, args.case is not None)
            counts[cls] = counts.get(cls, 0) + 1
            if cls != "ok" or args.show_ok:
                print("%-13s %s #%d  %s  | %s | %s" % (cls, t, i, desc, why, last), flush=True)
        total[t] = counts
        print("== %s: %d cases: %s" % (t, sum(counts.values()),
                                       ", ".join("%s %d" % kv for kv in sorted(counts.items()))), flush=True)
    hard = sum(c.get(k, 0) for c in total.values() for k in ("crash", "hang", "internal", "left_output", "nonsense",
                                                              "accepted_typo"))
    return 1 if hard else 0


if __name__ == "__main__":
    sys.exit(main())
