#!/usr/bin/env python3
"""weights/held_out.py — the held-out GPUs of weights/HELD_OUT and the one rule that says whether a name is one of them,
for the Python weight scripts (uncertainty.py, roofline_efficiency.py) and, through the command line, for
weights/held_out.sh (train.sh, evaluate.sh, uncertainty.sh, ensemble_study.sh).

    held_key(name)               a GPU name as a key: lower case, '_' as ' ', runs of spaces as one, without an
                                 'NVIDIA '/'AMD '/'Tesla ' prefix
    held_out_names(path)         the GPUs listed in HELD_OUT at path, as the file spells them (comments and blank
                                 lines skipped)
    held_out_matcher(path, gpus) is_held_out(name): true if name is one of them, as the file spells it or as any name,
                                 alias or file stem of its gpus/*.toml (so H100-SXM5-80GB and h100_sxm5_80gb are the
                                 listed NVIDIA H100 80GB HBM3)
    device_of(csv)               the device column of a CSV's first row (which GPU a per-GPU data file holds), or
                                 None without that column or without rows

Command line (standard library only):

    weights/held_out.py --list               the names of HELD_OUT, one a line
    weights/held_out.py NAME...              prints each NAME that is held out; exit 0 if one is, 1 if none is
    weights/held_out.py --device-of CSV      prints device_of(CSV) (nothing when None); exit 0
    [--held-out PATH] [--gpus-dir DIR]       default: weights/HELD_OUT and gpus/ beside this file

Any other failure (an unreadable HELD_OUT, a broken gpus/*.toml) exits 2, never 1: a check that cannot run never
reads as "not held out".
"""
import argparse
import os
import sys
import tomllib

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELD_OUT = os.path.join(_ROOT, "weights", "HELD_OUT")
GPUS_DIR = os.path.join(_ROOT, "gpus")


def held_key(name):
    k = " ".join(name.lower().replace("_", " ").split())
    for p in ("nvidia ", "amd ", "tesla "):
        k = k.removeprefix(p)
    return k


def held_out_names(path=HELD_OUT):
    """The GPUs of weights/HELD_OUT, as the file spells them."""
    names = []
    with open(path) as h:
        for line in h:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line)
    return names


def gpu_tables(gpus_dir=GPUS_DIR):
    """(file stem, table) per gpus/*.toml, calibration files (<stem>.calibration.toml: factors, not a GPU) aside."""
    out = []
    for f in sorted(os.listdir(gpus_dir)):
        if not f.endswith(".toml") or f.endswith(".calibration.toml"):
            continue
        path = os.path.join(gpus_dir, f)
        with open(path, "rb") as h:
            try:
                t = tomllib.load(h)
            except tomllib.TOMLDecodeError as e:
                raise ValueError(f"{path}: {e}") from e
        if not isinstance(t.get("name"), str):
            raise ValueError(f"{path}: no name")
        out.append((f[: -len(".toml")], t))
    return out


def gpu_names(gpus_dir=GPUS_DIR, tables=None):
    """Per gpus/*.toml (calibration files aside): its name, aliases and file stem (tables: gpu_tables' answer, when
    the caller has read them already)."""
    return [[t["name"], *t.get("aliases", []), stem] for stem, t in (tables or gpu_tables(gpus_dir))]


def device_of(path):
    """The device column of the CSV's first row, or None (no such column, no rows)."""
    with open(path) as h:
        head = h.readline().rstrip("\n").split(",")
        first = h.readline().rstrip("\n")
    if "device" not in head or not first:
        return None
    cells = first.split(",")
    i = head.index("device")
    return cells[i] if i < len(cells) else None


def held_out_matcher(path=HELD_OUT, gpus_dir=GPUS_DIR, tables=None):
    """is_held_out(name) for the GPUs of HELD_OUT at path, each known by every name of its gpus/*.toml (tables:
    gpu_tables(gpus_dir), when the caller has read them already)."""
    keys = {held_key(n) for n in held_out_names(path)}
    for names in gpu_names(gpus_dir, tables):
        ks = {held_key(n) for n in names}
        if ks & keys:
            keys |= ks
    keys.discard("")
    return lambda name: bool(name) and held_key(name) in keys


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--held-out", default=HELD_OUT)
    ap.add_argument("--gpus-dir", default=GPUS_DIR)
    ap.add_argument("--list", action="store_true", help="print the names of HELD_OUT")
    ap.add_argument("--device-of", metavar="CSV", help="print the device of a CSV's first row")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    if a.device_of:
        print(device_of(a.device_of) or "")
        return 0
    if a.list:
        for n in held_out_names(a.held_out):
            print(n)
        return 0
    is_held_out = held_out_matcher(a.held_out, a.gpus_dir)
    held = [n for n in a.names if is_held_out(n)]
    for n in held:
        print(n)
    return 0 if held else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as e:  # noqa: BLE001 — exit 2, never 1 ("not held out"), whatever went wrong
        print(f"held_out.py: {e}", file=sys.stderr)
        sys.exit(2)
