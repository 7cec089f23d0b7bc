# Helpers for ci/demo.sh and ci/test.sh (sourced, not run): each long step
# says what it does and about how long it takes, and how long it took; a
# tool's full output goes to a log file, and only the lines that show
# progress are printed, or the log's end when the tool fails.

# step TEXT: start a step, "== TEXT", and time it until the next step or
# step_done.
step() {
    step_done
    echo "== $1"
    step_name=$1
    step_started=$SECONDS
}

# step_done: say how long the running step took (once).
step_done() {
    if [[ -n ${step_name:-} ]]; then
        echo "   ($(( SECONDS - step_started )) s)"
        step_name=
    fi
}

# showing PATTERN LOG COMMAND...: run COMMAND with its output (stdout and
# stderr) in LOG, printing the lines that match the extended regular
# expression PATTERN as they come. If it fails: the end of LOG, and its
# exit status.
showing() {
    local pattern=$1 log=$2 status
    shift 2
    set +e
    "$@" 2>&1 | tee "$log" | { grep --line-buffered -E "$pattern" || true; } | sed -u 's/^/   /'
    status=${PIPESTATUS[0]}
    set -e
    [[ $status -eq 0 ]] || failed_with_log "$status" "$log"
    return "$status"
}

# quietly LOG COMMAND...: COMMAND's output in LOG, printed only if it fails.
quietly() {
    local log=$1 status=0
    shift
    "$@" >"$log" 2>&1 || status=$?
    [[ $status -eq 0 ]] || failed_with_log "$status" "$log"
    return "$status"
}

failed_with_log() {
    echo "   failed (exit $1); the end of $2:" >&2
    tail -n 60 "$2" | sed 's/^/   | /' >&2
}

# The lines of pip's output that show how far an install has got.
PIP_PROGRESS='^(Processing|Building wheels? for|  Building wheel for|Successfully (built|installed)|Installing collected)'
