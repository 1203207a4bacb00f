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
    trainable(paths, is_held_out, prog)
                                 the paths a script may train or fit on: those whose device is not held out (each
                                 skipped one named on stderr); a path that is no file is kept (its reader says it is
                                 missing); a file whose device cannot be read raises UnknownDevice

Command line (standard library only):

    weights/held_out.py --list               the names of HELD_OUT, one a line
    weights/held_out.py NAME...              prints each NAME that is held out; exit 0 if one is, 1 if none is
    weights/held_out.py --device-of CSV      prints device_of(CSV) (nothing when None); exit 0
    weights/held_out.py [--as PROG] --trainable FILE...
                                             prints trainable(FILE...), one a line (a path with a newline is refused);
                                             exit 0, or 2 naming a file whose device cannot be read (PROG, default
                                             held_out.py, starts the messages: weights/held_out.sh's trainable_files)
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


class UnknownDevice(ValueError):
    """A data file whose device cannot be read: it could be a held-out GPU's, so it is never trained on."""


def trainable(paths, is_held_out, prog="held_out.py"):
    """The paths a training or fitting script may read, in order: each file whose device (device_of) is not held out
    (is_held_out: held_out_matcher's answer); a held-out one is named on stderr as prog's and left out. A path that is
    no file is kept, for its reader to say it is missing. Raises UnknownDevice naming a file without a device column,
    rows or device (it could be a held-out GPU's)."""
    kept = []
    for p in paths:
        if os.path.isfile(p):
            dev = device_of(p)
            if not dev:
                raise UnknownDevice(f"{p}: no device column or no rows (held-out check impossible)")
            if is_held_out(dev):
                print(f"{prog}: skipping {p} (held-out GPU {dev}, weights/HELD_OUT)", file=sys.stderr)
                continue
        kept.append(p)
    return kept


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
    ap.add_argument("--trainable", action="store_true",
                    help="print the FILEs (the positional arguments) whose device is not held out, one a line")
    ap.add_argument("--as", dest="prog", default="held_out.py", help="the script named in --trainable's messages")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    if a.device_of:
        print(device_of(a.device_of) or "")
        return 0
    if a.trainable:
        for p in a.names:
            if "\n" in p:
                print(f"{a.prog}: {p!r}: a path with a newline (one path a line)", file=sys.stderr)
                return 2
        try:
            kept = trainable(a.names, held_out_matcher(a.held_out, a.gpus_dir), a.prog)
        except UnknownDevice as e:
            print(f"{a.prog}: {e}", file=sys.stderr)
            return 2
        for p in kept:
            print(p)
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
