# tap.sh - the TAP lines and the summary line of the lanes written in shell
# (package-test.sh, docker-lane.sh), sourced by them: each check prints
# "ok N - ..." or "not ok N - ..." (with details as "#" lines), and
# summary prints "N passed, N failed, N skipped", the line lanes.sh reads.

PASSED=0 FAILED=0 SKIPPED=0 N=0

ok() {
	N=$((N + 1)) PASSED=$((PASSED + 1))
	echo "ok $N - $1"
}

# not_ok "description" ["details"]
not_ok() {
	N=$((N + 1)) FAILED=$((FAILED + 1))
	echo "not ok $N - $1"
	[ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/#   /' | head -40
}

# check "description" command...: ok when the command succeeds
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# contains TEXT PATTERN: TEXT has a line matching the basic regular expression
contains() { grep -q -- "$2" <<<"$1"; }

# the summary line; false if anything failed
summary() {
	echo
	echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
	[ "$FAILED" -eq 0 ]
}

# a check that failed and that the rest depends on: the summary, exit 1
die() {
	not_ok "$1" "${2:-}"
	summary
	exit 1
}
