/*
 * pce_fill_map.c
 *		Test tool: fill a cluster's scan-PID map with entries for PIDs that
 *		do not exist, as an unprivileged member of the pins' group would.
 *
 *	pce_fill_map PIN_DIR N [TICKS]	add N fake entries (PIDs from 4000000 down)
 *									with start time TICKS (default 1; 0 is "no
 *									start time"); prints how many went in and
 *									the errno that stopped it, if any
 *	pce_fill_map PIN_DIR live PID	mark a live process as the module would
 *									(reason seqscan, its real start time), but
 *									with no backend behind the mark
 *	pce_fill_map PIN_DIR reason TEXT	write TEXT (C escapes \e, \n, \r
 *									turned into those bytes) as loader_info's
 *									reason, as a group member could
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>
#include <bpf/bpf.h>

#include "pg_cache_ext.h"
#include "pce_proc_stat.h"

/* loader_info's reason := text with \e, \n, \r unescaped */
static int
write_reason(const char *pin_dir, const char *text)
{
	char		path[4096];
	struct pce_loader_info li;
	__u32		key = 0;
	size_t		n = 0;
	int			fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, PCE_PIN_LOADER_INFO);
	fd = bpf_obj_get(path);
	if (fd < 0 || bpf_map_lookup_elem(fd, &key, &li) != 0)
	{
		fprintf(stderr, "pce_fill_map: cannot read %s: %s\n", path, strerror(errno));
		return 1;
	}
	memset(li.reason, 0, sizeof(li.reason));
	for (const char *p = text; *p && n + 1 < sizeof(li.reason); p++)
	{
		if (p[0] == '\\' && p[1])
		{
			p++;
			li.reason[n++] = *p == 'e' ? 033 : *p == 'n' ? '\n' : *p == 'r' ? '\r' : *p;
		}
		else
			li.reason[n++] = *p;
	}
	if (bpf_map_update_elem(fd, &key, &li, BPF_ANY) != 0)
	{
		printf("failed %s\n", strerror(errno));
		return 1;
	}
	printf("written\n");
	return 0;
}

int
main(int argc, char **argv)
{
	char		path[4096];
	int			fd;
	int			n;
	int			added = 0;
	struct pce_scan_mark mark;

	if (argc != 3 && argc != 4)
	{
		fprintf(stderr, "usage: pce_fill_map PIN_DIR N [TICKS] | pce_fill_map PIN_DIR live PID | "
				"pce_fill_map PIN_DIR reason TEXT\n");
		return 2;
	}
	if (strcmp(argv[2], "reason") == 0 && argc == 4)
		return write_reason(argv[1], argv[3]);
	snprintf(path, sizeof(path), "%s/%s", argv[1], PCE_PIN_SCAN_PIDS);
	fd = bpf_obj_get(path);
	if (fd < 0)
	{
		fprintf(stderr, "pce_fill_map: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	memset(&mark, 0, sizeof(mark));
	if (strcmp(argv[2], "live") == 0 && argc == 4)
	{
		__u32		pid = atoi(argv[3]);

		mark.proc_start_ticks = pce_proc_start_ticks((int) pid);
		if (mark.proc_start_ticks == 0)
			return 1;
		mark.reason = PCE_REASON_SEQSCAN;
		/* PostgreSQL timestamps count from 2000-01-01; "long ago" is enough */
		mark.marked_at_us = 0;
		if (bpf_map_update_elem(fd, &pid, &mark, BPF_ANY) != 0)
		{
			printf("failed %s\n", strerror(errno));
			return 1;
		}
		printf("marked %u\n", pid);
		return 0;
	}
	n = atoi(argv[2]);
	/* by default 1: no live process has this start time */
	mark.proc_start_ticks = argc == 4 ? strtoull(argv[3], NULL, 10) : 1;
	mark.reason = PCE_REASON_TEST;
	for (int i = 0; i < n; i++)
	{
		__u32		pid = 4000000 - i;

		if (bpf_map_update_elem(fd, &pid, &mark, BPF_NOEXIST) != 0)
		{
			printf("added %d stopped %s\n", added, strerror(errno));
			return 0;
		}
		added++;
	}
	printf("added %d\n", added);
	return 0;
}
