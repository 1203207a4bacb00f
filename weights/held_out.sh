# weights/held_out.sh — sourced by the weight scripts: the held-out GPUs of weights/HELD_OUT (the one list), through
# weights/held_out.py (the one matcher, which the Python weight scripts import).
#   held_out            array of the names, as the file spells them
#   held_out_flags      array: --exclude-gpu NAME for each (what weights/train.sh always passes)
#   is_held_out NAME    true if NAME is one of them: as the file spells it, or any name, alias or file stem of its
#                       gpus/*.toml (case, '_' or ' ', an 'NVIDIA '/'AMD '/'Tesla ' prefix aside); the scripts refuse
#                       such a fold
#   device_of CSV       the device column of a CSV's first row (which GPU a per-GPU data file holds; empty without
#                       that column or rows): held_out.py's device_of
#   refuse_held_out "G1;G2" SCRIPT   exit 2 if a fold list names one of them
#   trainable_files ARRAY SCRIPT FILE…   ARRAY gets the FILEs whose device is not held out, in order (held_out.py
#                       --trainable, one process for the list); SCRIPT: skipping F (held-out GPU D, …) on stderr for each
#                       other; a path that is no file is kept (its reader says it is missing); a file whose device
#                       cannot be read (no device column, no rows) or a path with a newline stops the script (exit 2)
# A failure of held_out.py itself (exit 2: no HELD_OUT, a broken gpus/*.toml) stops the sourcing script: it never
# reads as "not held out".
_held_out_py="$(dirname "${BASH_SOURCE[0]}")/held_out.py"
# held_out.py [ARGS…]: its exit status, 0 or 1; anything else ends the script that sourced this file.
_held_out_run() {
  local rc=0
  python3 "$_held_out_py" "$@" || rc=$?
  if [ "$rc" -gt 1 ]; then echo "held_out.sh: weights/held_out.py failed (exit $rc)" >&2; exit 2; fi
  return "$rc"
}
held_out=() held_out_flags=()
_held_out_list=$(_held_out_run --list) || exit 2
while IFS= read -r _line; do
  [ -n "$_line" ] || continue
  held_out+=("$_line")
  held_out_flags+=(--exclude-gpu "$_line")
done <<< "$_held_out_list"
unset _line _held_out_list
is_held_out() { _held_out_run -- "$1" >/dev/null; }
device_of() { _held_out_run --device-of "$1"; }
refuse_held_out() {  # "G1;G2;…" script: exit 2 if a fold list names a held-out GPU (never a fold, never scored)
  local g _l rc=0
  IFS=';' read -ra _l <<< "$1"
  [ ${#_l[@]} -gt 0 ] || return 0
  g=$(_held_out_run -- "${_l[@]}") || rc=$?
  [ "$rc" -eq 0 ] || { [ "$rc" -eq 1 ] && return 0; exit 2; }  # 2: held_out.py failed (it said why)
  echo "$2: ${g%%$'\n'*} is a held-out evaluation GPU (weights/HELD_OUT): never a fold" >&2
  exit 2
}
trainable_files() {  # ARRAY SCRIPT FILE…: run in the script's shell (not in $( )), so that exit 2 stops it
  local -n _held_out_kept=$1
  local _kept_list
  _held_out_kept=()
  [ $# -gt 2 ] || return 0
  # not through _held_out_run: held_out.py says why it refused (a file without a device, a newline) or failed
  _kept_list=$(python3 "$_held_out_py" --as "$2" --trainable -- "${@:3}") || exit 2
  [ -z "$_kept_list" ] || mapfile -t _held_out_kept <<< "$_kept_list"
}
