# weights/held_out.sh — sourced by the weight scripts: the held-out GPUs of weights/HELD_OUT (the one list).
#   held_out            array of the names, as the file spells them
#   held_out_flags      array: --exclude-gpu NAME for each (what weights/train.sh always passes)
#   is_held_out NAME    true if NAME (any spelling of the file's names: case, '_' or ' ', an 'NVIDIA '/'AMD ' prefix)
#                       is one of them; the scripts refuse such a fold
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
is_held_out() {
  local k x
  k=$(_held_out_key "$1")
  for x in "${held_out[@]}"; do [ "$(_held_out_key "$x")" = "$k" ] && return 0; done
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
