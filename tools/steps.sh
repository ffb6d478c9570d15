# shellcheck shell=bash
# step NAME COMMAND [ARG...]: run COMMAND, telling stderr when it started and how long it took, in
# the form tools/run-tiers reads back ("step: NAME started HH:MM:SS", "step: NAME took N s"): the
# build scripts and the scenario time each of their steps with it, and the run's time guard names
# the step it stopped in. Sourced, not run; prints nothing on stdout (the build scripts print their
# result there) and returns COMMAND's status.
step() {
  local name=$1 began=$SECONDS rc=0
  shift
  echo "step: $name started $(date -u +%H:%M:%S)" >&2
  "$@" || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "step: $name took $((SECONDS - began)) s" >&2
  else
    echo "step: $name failed (exit $rc) after $((SECONDS - began)) s" >&2
  fi
  return "$rc"
}

# phase NAME: end the phase begun before (its time on stderr) and begin NAME; phase "" ends the
# last one. For scripts that are a sequence of steps rather than commands.
phase() {
  if [ -n "${_phase_name:-}" ]; then
    echo "step: $_phase_name took $((SECONDS - _phase_began)) s" >&2
  fi
  _phase_name=$1
  _phase_began=$SECONDS
  if [ -n "$1" ]; then
    echo "step: $1 started $(date -u +%H:%M:%S)" >&2
  fi
}

# open_steps LOG: the steps LOG shows begun and not (yet) ended, in the order they began, joined by
# ", " (nothing when none is open). Lines may carry molecule's box prefix.
open_steps() {
  sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^ *[│┌└] \{0,1\}//' "$1" | awk '
    /^step: .* started [0-9:]+$/ { n = $0; sub(/^step: /, "", n); sub(/ started [0-9:]+$/, "", n); open[n] = 1; order[++k] = n }
    /^step: .* (took|failed)/ { n = $0; sub(/^step: /, "", n); sub(/ (took|failed).*$/, "", n); delete open[n] }
    END { for (i = 1; i <= k; i++) if (order[i] in open) { printf "%s%s", sep, order[i]; sep = ", "; delete open[order[i]] } }'
}
