# Shared by the fault-injection scripts (sourced): wait for what a run says instead of
# sleeping a fixed time before a kill, and find a rank's process by its rank, not by
# its name (other runs of the same binary may be alive).

# wait_line FILE REGEX SECONDS: until a line of FILE matches REGEX (grep -E); non-zero
# (and a line saying so) if none did within SECONDS, or if process $4 (optional, the
# job) ended before.
wait_line() {
    deadline=$(($(date +%s) + $3))
    while ! grep -Eq "$2" "$1" 2>/dev/null; do
        if [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null; then
            echo "the job ended before a line of $1 matched '$2'"
            return 1
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "no line of $1 matched '$2' within $3 s"
            return 1
        fi
        sleep 0.1
    done
}

# rank_pid MPIRUN_PID RANK: the process of that rank among mpirun's children (Open MPI
# starts local ranks as its children, each with OMPI_COMM_WORLD_RANK in its
# environment); empty if there is none.
rank_pid() {
    for p in $(pgrep -P "$1"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
            echo "$p"
            return 0
        fi
    done
}
