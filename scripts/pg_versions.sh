# pg_versions.sh - which PostgreSQL major version is installed, for
# scripts/setup.sh (which builds against it) and bench/lib.sh (which runs
# its server).  Sourced, not run.

# the newest of a list of PostgreSQL package names postgresql-NN
newest_major() {
	grep -E '^postgresql-[0-9]+$' | sed 's/^postgresql-//' | sort -n | tail -1
}

# the newest installed server's major version, or nothing
installed_pg_major() {
	dpkg-query -W -f='${Package} ${Status}\n' 'postgresql-[0-9]*' 2>/dev/null |
		awk '/install ok installed/ {print $1}' | newest_major
}
