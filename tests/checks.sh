# Shared by the shell tests (sourced): a scratch folder removed at exit, a counter of
# passed and failed checks, and the closing line CTest's output shows.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
check() { # description, then a command that must succeed
    what=$1
    shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what"; fi
}
finish() { # prints the tally; exits non-zero if any check failed
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
