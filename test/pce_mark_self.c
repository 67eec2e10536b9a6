/*
 * pce_mark_self.c
 *		Test tool: read files sequentially, optionally marked as a scan, and
 *		report how much of a file is resident in the page cache.
 *
 *   pce_mark_self [-p PIN_DIR] [-n PASSES] [-w MB] read FILE...
 *		read every FILE PASSES times (default 1) with read(2); with -p, first
 *		put this process's PID into PIN_DIR/scan_pids (reason PCE_REASON_TEST)
 *		and remove it again at the end, like a PostgreSQL backend running a scan.
 *		With -w, write back what was read in the first MB MiB of each file
 *		(the same bytes), leaving those pages dirty, as VACUUM or the first
 *		scan after a bulk load (hint bits) does.
 *   pce_mark_self resident FILE
 *		print "<percent> <resident pages> <pages>" (mincore(2)).
 *   pce_mark_self drain PIN_DIR FILE
 *		consume the tracker's records (PIN_DIR/folio_events) and drop from the
 *		page cache exactly the folios recorded for FILE, as the evictor would;
 *		print "records <n> pages <sum of their sizes> largest <pages>".  Only
 *		where no evictor reads the ring (a pin directory of the test's own).
 *   pce_mark_self loader-info PIN_DIR MECHANISM CGROUP
 *		print loader_info's "<mechanism> <cgroup>", then write MECHANISM
 *		(a number, enum pce_mechanism) and CGROUP into it, as a member of the
 *		cluster's group could (what pg_cache_ext_run must not trust).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "pg_cache_ext.h"

static int
resident(const char *file)
{
	int			fd = open(file, O_RDONLY);
	struct stat st;
	long		page = sysconf(_SC_PAGESIZE);
	size_t		pages,
				in = 0;
	unsigned char *vec;
	void	   *addr;

	if (fd < 0 || fstat(fd, &st) != 0)
	{
		perror(file);
		return 1;
	}
	pages = (st.st_size + page - 1) / page;
	if (pages == 0)
	{
		printf("100.0 0 0\n");
		return 0;
	}
	addr = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	vec = malloc(pages);
	if (addr == MAP_FAILED || !vec || mincore(addr, st.st_size, vec) != 0)
	{
		perror("mincore");
		return 1;
	}
	for (size_t i = 0; i < pages; i++)
		in += vec[i] & 1;
	printf("%.1f %zu %zu\n", 100.0 * in / pages, in, pages);
	return 0;
}

struct drain
{
	int			fd;				/* FILE, to drop from */
	__u32		dev;			/* FILE's device, as the tracker records it */
	__u64		ino;
	unsigned long records,
				pages,
				largest;
};

static int
drain_one(void *ctx, void *data, size_t size)
{
	struct drain *d = ctx;
	const struct pce_folio_event *ev = data;
	long		page = sysconf(_SC_PAGESIZE);

	if (size < sizeof(*ev) || ev->kind != PCE_FOLIO_ADDED || ev->dev != d->dev || ev->ino != d->ino)
		return 0;
	d->records++;
	d->pages += ev->nr_pages;
	if (ev->nr_pages > d->largest)
		d->largest = ev->nr_pages;
	posix_fadvise(d->fd, (off_t) ev->index * page, (off_t) ev->nr_pages * page, POSIX_FADV_DONTNEED);
	return 0;
}

static int
drain(const char *pin_dir, const char *file)
{
	char		path[4096];
	struct drain d = {0};
	struct stat st;
	struct ring_buffer *rb;
	int			map_fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, PCE_PIN_FOLIO_EVENTS);
	d.fd = open(file, O_RDONLY);
	map_fd = bpf_obj_get(path);
	if (d.fd < 0 || fstat(d.fd, &st) != 0 || map_fd < 0)
	{
		fprintf(stderr, "pce_mark_self: cannot open %s or %s: %s\n", file, path, strerror(errno));
		return 1;
	}
	d.dev = (major(st.st_dev) << 20) | minor(st.st_dev);
	d.ino = st.st_ino;
	rb = ring_buffer__new(map_fd, drain_one, &d, NULL);
	if (!rb || ring_buffer__consume(rb) < 0)
	{
		fprintf(stderr, "pce_mark_self: cannot read %s\n", path);
		return 1;
	}
	ring_buffer__free(rb);
	printf("records %lu pages %lu largest %lu\n", d.records, d.pages, d.largest);
	return 0;
}

static int
set_loader_info(const char *pin_dir, const char *mechanism, const char *cgroup)
{
	char		path[4096];
	struct pce_loader_info li;
	__u32		key = 0;
	int			map_fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, PCE_PIN_LOADER_INFO);
	map_fd = bpf_obj_get(path);
	if (map_fd < 0 || bpf_map_lookup_elem(map_fd, &key, &li) != 0)
	{
		fprintf(stderr, "pce_mark_self: cannot read %s: %s\n", path, strerror(errno));
		return 1;
	}
	li.cgroup[sizeof(li.cgroup) - 1] = '\0';
	printf("%u %s\n", li.mechanism, li.cgroup);
	li.mechanism = (__u32) atoi(mechanism);
	snprintf(li.cgroup, sizeof(li.cgroup), "%s", cgroup);
	if (bpf_map_update_elem(map_fd, &key, &li, BPF_ANY) != 0)
	{
		fprintf(stderr, "pce_mark_self: cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	const char *pin_dir = NULL;
	int			passes = 1,
				dirty_mb = 0,
				opt,
				map_fd = -1;
	__u32		pid = getpid();
	static char buf[1 << 20];

	while ((opt = getopt(argc, argv, "p:n:w:")) != -1)
	{
		if (opt == 'p')
			pin_dir = optarg;
		else if (opt == 'w')
			dirty_mb = atoi(optarg);
		else if (opt == 'n')
			passes = atoi(optarg);
		else
			return 2;
	}
	if (optind >= argc)
	{
		fprintf(stderr, "usage: pce_mark_self [-p PIN_DIR] [-n PASSES] [-w MB] read FILE... | resident FILE | drain PIN_DIR FILE\n");
		return 2;
	}
	if (strcmp(argv[optind], "resident") == 0 && optind + 1 < argc)
		return resident(argv[optind + 1]);
	if (strcmp(argv[optind], "drain") == 0 && optind + 2 < argc)
		return drain(argv[optind + 1], argv[optind + 2]);
	if (strcmp(argv[optind], "loader-info") == 0 && optind + 3 < argc)
		return set_loader_info(argv[optind + 1], argv[optind + 2], argv[optind + 3]);
	if (strcmp(argv[optind], "read") != 0)
		return 2;

	if (pin_dir)
	{
		char		path[4096];
		struct pce_scan_mark mark = {.reason = PCE_REASON_TEST};

		snprintf(path, sizeof(path), "%s/%s", pin_dir, PCE_PIN_SCAN_PIDS);
		map_fd = bpf_obj_get(path);
		if (map_fd < 0 || bpf_map_update_elem(map_fd, &pid, &mark, BPF_ANY) != 0)
		{
			fprintf(stderr, "pce_mark_self: cannot mark PID %u in %s: %s\n", pid, path, strerror(errno));
			return 1;
		}
	}
	for (int p = 0; p < passes; p++)
		for (int i = optind + 1; i < argc; i++)
		{
			int			fd = open(argv[i], dirty_mb ? O_RDWR : O_RDONLY);
			ssize_t		n;
			off_t		off = 0;

			if (fd < 0)
			{
				perror(argv[i]);
				return 1;
			}
			while ((n = read(fd, buf, sizeof(buf))) > 0)
			{
				if (off < (off_t) dirty_mb << 20 && pwrite(fd, buf, n, off) != n)
				{
					perror("pwrite");
					return 1;
				}
				off += n;
			}
			close(fd);
		}
	if (map_fd >= 0)
		bpf_map_delete_elem(map_fd, &pid);
	return 0;
}
