#!/bin/bash
# check-shape.sh: no function in src/, loader/ or runner/ longer than 80 lines.
#
# A function is a top-level brace block whose opening line follows a line
# ending in ')' (a definition); its length runs from the line with its name
# to its closing brace.  Declarative tables (initializers after '=') are not
# functions and are not counted.  Prints every function over the limit with
# file, line and length; exits 1 if there is one.
#
# Usage: scripts/check-shape.sh [max-lines] [files...]
set -u
max=${1:-80}
shift || true
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
	set -- src/*.c loader/*.c runner/*.c
fi
awk -v max="$max" '
FNR == 1 { depth = 0; prev = ""; infunc = 0 }
{
	line = $0
	# drop string and char literals and line comments (crude but enough)
	gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
	gsub(/'\''([^'\''\\]|\\.)*'\''/, "0", line)
	sub(/\/\/.*/, "", line)
	if (incomment) {
		if (line ~ /\*\//) { sub(/.*\*\//, "", line); incomment = 0 }
		else next
	}
	gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, "", line)
	if (line ~ /\/\*/) { sub(/\/\*.*/, "", line); incomment = 1 }
	if (depth == 0 && line ~ /^\{/ && prev ~ /\)[ \t]*$/) {
		infunc = 1; start = prevline; name = prevname
	}
	n = gsub(/\{/, "{", line); depth += n
	n = gsub(/\}/, "}", line); depth -= n
	if (infunc && depth == 0) {
		len = FNR - start + 1
		if (len > max) {
			printf "%s:%d: %s is %d lines (limit %d)\n", FILENAME, start, name, len, max
			bad = 1
		}
		infunc = 0
	}
	if (line ~ /[^ \t]/) {
		prev = line
		if (depth == 0 && match(line, /[A-Za-z_][A-Za-z_0-9]*[ \t]*\(/)) {
			prevname = substr(line, RSTART, RLENGTH)
			prevline = FNR
			sub(/[ \t]*\($/, "", prevname)
		}
	}
}
END { exit bad ? 1 : 0 }
' "$@"
status=$?
if [ $status -eq 0 ]; then
	echo "check-shape: no function over $max lines in $# files"
fi
exit $status
