# weights/held_out.sh — sourced by the weight scripts: the held-out GPUs of weights/HELD_OUT (the one list).
#   held_out            array of the names, as the file spells them
#   held_out_flags      array: --exclude-gpu NAME for each (what weights/train.sh always passes)
#   is_held_out NAME    true if NAME is one of them: as the file spells it, or any name, alias or file stem of its
#                       gpus/*.toml (case, '_' or ' ', an 'NVIDIA '/'AMD ' prefix aside); the scripts refuse such a fold
#   device_of CSV       the device column of a CSV's first row (which GPU a per-GPU data file holds)
#   refuse_held_out "G1;G2" SCRIPT   exit 2 if a fold list names one of them
held_out=() held_out_flags=()
while IFS= read -r _line; do
  _line=${_line%%#*}
  _line=$(echo "$_line" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//')
  [ -n "$_line" ] || continue
  held_out+=("$_line")
  held_out_flags+=(--exclude-gpu "$_line")
done < "$(dirname "${BASH_SOURCE[0]}")/HELD_OUT"
unset _line
_held_out_key() { echo "$1" | tr '[:upper:]_' '[:lower:] ' | sed -e 's/^nvidia //' -e 's/^amd //' -e 's/^tesla //'; }
# The names the file's GPUs go by: each as spelled, plus the name, aliases and file stem of the gpus/*.toml it is
# (`neusight gpus --format json`, so H100-SXM5-80GB and h100_sxm5_80gb are the H100 80GB HBM3), made once.
_held_out_names=()
_held_out_expand() {
  [ ${#_held_out_names[@]} -eq 0 ] || return 0
  _held_out_names=("${held_out[@]}")
  local exe=${NEUSIGHT:-build/neusight} n
  [ -x "$exe" ] || return 0  # no binary yet: the file's spellings alone
  while IFS= read -r n; do [ -n "$n" ] && _held_out_names+=("$n"); done < <("$exe" gpus --format json | python3 -c '
import json, os, sys
key = lambda s: " ".join(s.lower().replace("_", " ").split()).removeprefix("nvidia ").removeprefix("amd ").removeprefix("tesla ")
held = {key(l) for l in sys.argv[1:]}
for g in json.load(sys.stdin):
    names = [g["name"], *g.get("aliases", []), os.path.splitext(os.path.basename(g.get("file", "")))[0]]
    if held & {key(n) for n in names if n}:
        print("\n".join(n for n in names if n))
' "${held_out[@]}")
}
is_held_out() {
  local k x
  _held_out_expand
  k=$(_held_out_key "$1")
  for x in "${_held_out_names[@]}"; do [ "$(_held_out_key "$x")" = "$k" ] && return 0; done
  return 1
}
device_of() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "device") c = i; if (!c) exit } NR == 2 { print $c; exit }' "$1"
}
refuse_held_out() {  # "G1;G2;…" script: exit 2 if a fold list names a held-out GPU (never a fold, never scored)
  local g _l
  IFS=';' read -ra _l <<< "$1"
  for g in "${_l[@]}"; do
    if is_held_out "$g"; then echo "$2: $g is a held-out evaluation GPU (weights/HELD_OUT): never a fold" >&2; exit 2; fi
  done
}
