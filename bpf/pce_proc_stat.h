/*
 * pce_proc_stat.h
 *		A process's start time as /proc/<pid>/stat gives it (field 22, clock
 *		ticks since boot): with the PID it identifies a process for good, and
 *		scan marks carry it (struct pce_scan_mark.proc_start_ticks).
 *
 * One reader for the module's registry and the test tools, so that what
 * they write is what the BPF side (maps.bpf.h, task_matches_mark) and the
 * worker's sweep compare.  User space only (POSIX I/O, not BPF code).
 */
#ifndef PCE_PROC_STAT_H
#define PCE_PROC_STAT_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Field 22 of /proc/<pid>/stat, or 0 if the process is gone; with
 * live_only, also 0 for a process that has ended but is not yet reaped
 * (state Z or X: a zombie keeps its PID and start time).
 */
static inline unsigned long long
pce_proc_stat_start_ticks(int pid, int live_only)
{
	char		path[64];
	char		buf[1024];
	int			fd;
	ssize_t		n;
	char	   *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: skip to the last ')' */
	p = strrchr(buf, ')');
	if (live_only && p && (p[1] == '\0' || p[2] == 'Z' || p[2] == 'X'))
		return 0;
	/* after ')' comes field 3 (state); we want field 22 */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* Field 22 of /proc/<pid>/stat, or 0 if the process is gone. */
static inline unsigned long long
pce_proc_start_ticks(int pid)
{
	return pce_proc_stat_start_ticks(pid, 0);
}

#endif							/* PCE_PROC_STAT_H */
