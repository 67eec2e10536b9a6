#!/usr/bin/env python3
"""bench/cpu.py - where a cluster's CPU goes, by role, every second.

    bench/cpu.py PSQL_ARGS SECONDS > cpu.dat

PSQL_ARGS is one string: the psql command line that reaches the cluster
(psql -X -At -h DIR -p PORT -U postgres -d postgres).  Each second, one
line: seconds since the start, the machine's busy and iowait share (% of
all its CPUs: /proc/stat), then for each role three columns: the CPU it used in that
second (% of one CPU: utime + stime of /proc/PID/stat) and in how many of
ten samples over the second its processes were in uninterruptible sleep
(D: waiting on the disk or a page lock), summed over its processes, and
the time they waited for a CPU while runnable (% of one CPU:
/proc/PID/schedstat's run delay).
The roles (ROLES, in this order): the count(*) backends, pg_dump's
backend and the pg_dump client, the VACUUM's backend, the OLTP backends
and the pgbench client, the pg_cache_ext worker, and the rest of the
cluster (checkpointer, bgwriter, ...).  Which backend is which comes
from pg_stat_activity, asked once a second; the clients and the worker are
found by their command lines.
"""
import os
import subprocess
import sys
import time

ROLES = ["count", "dump", "dump_client", "vac", "oltp", "pgbench", "worker", "other"]
SAMPLES_PER_SECOND = 10


def backend_roles(psql):
    """pid -> role of the cluster's server processes"""
    query = """SELECT pid, CASE
        WHEN query ~* '^VACUUM' AND state = 'active' THEN 'vac'
        WHEN application_name = 'pg_dump' THEN 'dump'
        WHEN application_name = 'pce_scan' THEN 'count'
        WHEN application_name = 'pgbench' THEN 'oltp'
        ELSE 'other' END FROM pg_stat_activity"""
    try:
        out = subprocess.run(psql + ["-F", " ", "-c", query], capture_output=True,
                             text=True, timeout=5).stdout
    except subprocess.TimeoutExpired:
        return {}
    return {int(p): r for p, r in (l.split() for l in out.splitlines() if l.strip())}


def roles_by_name():
    """pid -> role of the client programs and the pg_cache_ext worker (which
    has no row in pg_stat_activity), by their command names"""
    roles = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        prog = os.path.basename(cmdline.split(" ", 1)[0])
        if prog in ("pg_dump", "pgbench"):
            roles[int(pid)] = "dump_client" if prog == "pg_dump" else "pgbench"
        elif cmdline.startswith("postgres: pg_cache_ext worker"):
            roles[int(pid)] = "worker"
    return roles


def run_delay_ns(pid):
    """nanoseconds a process has waited on a run queue so far, or None"""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def proc_stat(pid):
    """(state, utime + stime in ticks) of a process, or None once it is gone"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[11]) + int(fields[12])


def machine_ticks():
    """(busy, iowait, all) ticks of the machine so far"""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle, iowait = v[3], v[4]
    return sum(v) - idle - iowait, iowait, sum(v)


def usage(pid):
    """(CPU ticks, run-queue wait ns) of a process so far, or None"""
    st, delay = proc_stat(pid), run_delay_ns(pid)
    return (st[1], delay) if st and delay is not None else None


def one_second(roles, before):
    """sample the roles' states for a second; per role the CPU ticks used
    and the run-queue wait (ns) in it, the D samples, and each process's
    usage at its end"""
    asleep = dict.fromkeys(ROLES, 0)
    for _ in range(SAMPLES_PER_SECOND):
        for pid, role in roles.items():
            st = proc_stat(pid)
            if st and st[0] == "D":
                asleep[role] += 1
        time.sleep(1.0 / SAMPLES_PER_SECOND)
    after = {pid: u for pid in roles if (u := usage(pid))}
    used = dict.fromkeys(ROLES, 0)
    waited = dict.fromkeys(ROLES, 0)
    for pid, (ticks, delay) in after.items():
        # a process seen for the first time counts from its first sample
        ticks0, delay0 = before.get(pid, (ticks, delay))
        used[roles[pid]] += ticks - ticks0
        waited[roles[pid]] += delay - delay0
    return used, waited, asleep, after


def main():
    psql, seconds = sys.argv[1].split(), int(sys.argv[2])
    hz = os.sysconf("SC_CLK_TCK")
    print("# t busy% iowait% " + " ".join(f"{r}_cpu% {r}_D {r}_runq%" for r in ROLES), flush=True)
    t0 = time.time()
    before = {}
    m_before, wall_before = machine_ticks(), time.time()
    while time.time() - t0 < seconds:
        roles = backend_roles(psql)
        roles.update(roles_by_name())
        for pid in roles:
            if pid not in before and (u := usage(pid)):
                before[pid] = u
        used, waited, asleep, before = one_second(roles, before)
        m_after, wall_after = machine_ticks(), time.time()
        span = max(m_after[2] - m_before[2], 1)
        wall = max(wall_after - wall_before, 0.1)
        cols = [f"{time.time() - t0:.0f}",
                f"{100.0 * (m_after[0] - m_before[0]) / span:.0f}",
                f"{100.0 * (m_after[1] - m_before[1]) / span:.0f}"]
        cols += [f"{100.0 * used[r] / hz / wall:.0f} {asleep[r]} {waited[r] / 1e7 / wall:.0f}"
                 for r in ROLES]
        print(" ".join(cols), flush=True)
        m_before, wall_before = m_after, wall_after


if __name__ == "__main__":
    main()
