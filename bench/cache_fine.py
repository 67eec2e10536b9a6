#!/usr/bin/env python3
"""bench/cache_fine.py - a relation's page cache, every few milliseconds.

    bench/cache_fine.py INTERVAL_MS SECONDS FILE... > cache-fine.dat

Each line: milliseconds since the start, then the MB of the files' pages
in the page cache and of them the MB dirty (cachestat(2), Linux 6.5+; one
call per file, no psql in between: a scan at disk speed moves the cache by
MB between two samples a second apart).  bench/siblings.sh's FINE=1 runs
it on the scanned table's segments, so that "never above budget + one
batch" is checked at this rate, not once a second.
"""
import ctypes
import os
import sys
import time

SYS_CACHESTAT = 451        # x86_64 and the generic table alike


class Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class CacheStat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64),
                ("nr_writeback", ctypes.c_uint64), ("nr_evicted", ctypes.c_uint64),
                ("nr_recently_evicted", ctypes.c_uint64)]


def main():
    interval, seconds, paths = int(sys.argv[1]) / 1000.0, float(sys.argv[2]), sys.argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    fds = [os.open(p, os.O_RDONLY) for p in paths if os.path.exists(p)]
    whole = Range(0, 0)         # len 0: to the end of the file
    mb = os.sysconf("SC_PAGE_SIZE") / 1048576.0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        cached = dirty = 0
        for fd in fds:
            cs = CacheStat()
            if libc.syscall(SYS_CACHESTAT, fd, ctypes.byref(whole), ctypes.byref(cs), 0) != 0:
                sys.exit(f"cachestat: {os.strerror(ctypes.get_errno())}")
            cached += cs.nr_cache
            dirty += cs.nr_dirty
        print(f"{(time.monotonic() - t0) * 1000:.0f} {cached * mb:.1f} {dirty * mb:.1f}", flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    main()
