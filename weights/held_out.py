"""weights/held_out.py — the held-out GPUs of weights/HELD_OUT for the Python weight scripts (uncertainty.py,
roofline_efficiency.py); weights/held_out.sh is the shell scripts' reader of the same file.

    held_key(name)      a GPU name as a key: lower case, '_' as ' ', without an 'NVIDIA '/'AMD '/'Tesla ' prefix
    held_out_keys(path) the keys of the GPUs listed in HELD_OUT at path (comments and blank lines skipped)
"""


def held_key(name):
    k = name.lower().replace("_", " ")
    for p in ("nvidia ", "amd ", "tesla "):
        if k.startswith(p):
            k = k[len(p):]
    return k


def held_out_keys(path):
    """The GPUs of weights/HELD_OUT, as keys of held_key()."""
    keys = set()
    with open(path) as h:
        for line in h:
            line = line.split("#", 1)[0].strip()
            if line:
                keys.add(held_key(line))
    return keys
