/*
 * policy.c
 *		The loader's cache_ext part: detect cache_ext, load the struct_ops
 *		policy (bpf/policy.bpf.c), attach it to a cgroup v2 directory and pin
 *		its link; detach it again.
 *
 * Built against Debian's libbpf 1.1, which knows neither sleepable
 * struct_ops programs nor link-mode struct_ops maps nor the cache_ext link
 * type of the research kernel.  So this file does by hand what the fork's
 * bpf_map__attach_cache_ext_ops() does:
 *
 *	1. before loading, mark init() sleepable (BPF_F_SLEEPABLE) and the
 *	   struct_ops map link-mode (BPF_F_LINK);
 *	2. after loading, write the map's value (struct bpf_struct_ops_cache_ext_ops
 *	   of the running kernel, laid out from its BTF, one program fd per
 *	   callback member): for a link-mode map this only makes it ready;
 *	3. BPF_LINK_CREATE with the map fd, the cgroup directory fd and the
 *	   attach type BPF_CACHE_EXT_OPS, whose number is read from the running
 *	   kernel's BTF (enum bpf_attach_type), never hard-coded.
 *
 * The link is pinned as <pin_dir>/policy_link and the struct_ops map as
 * <pin_dir>/policy_ops (so that nothing depends on this process staying
 * alive, and so that the map provably outlives the link's teardown), through
 * the pin directory's fd (pins.c), root:root, mode 0600: the server only checks for them.
 *
 * The cgroup is opened once, without following symlinks, checked by its fd
 * (cgroup v2 magic, its name as the kernel resolves the fd) and used by that
 * fd; the detach finds the cgroup from the link (its id), never by a path.
 *
 * Research-kernel facts this file works around (found in the lab):
 *	- cache_ext runs a policy only on memory cgroups whose name starts with
 *	  "cache_ext"; a link elsewhere is accepted and does nothing: refused here.
 *	- a second link on the same cgroup is not refused by the kernel (it would
 *	  replace the first, whose teardown would then free the second's lists):
 *	  refused here (existing pin, or an existing cache_ext link on the cgroup).
 *	- link teardown is asynchronous (workqueue) and frees the lists leaving
 *	  poisoned nodes while callbacks still run: a page-cache removal in the
 *	  cgroup at that moment oopses (GPF at 0xdead000000000108 in
 *	  cache_ext_list_del).  pce_detach_policy() quiesces the cgroup (limits
 *	  lifted, page cache reclaimed through the policy), drops link and map,
 *	  waits for the kernel to free the map (the end of the teardown) and
 *	  only then restores the limits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "pg_cache_ext.h"
#include "policy.skel.h"
#include "policy.h"
#include "pins.h"
#include "safe_open.h"

#ifndef BPF_F_LINK
#define BPF_F_LINK (1U << 13)	/* map flag, Linux 6.4+; absent from older uapi headers */
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/*
 * struct_ops member -> program of policy.bpf.c, X(member, program): the
 * programs are taken from the skeleton (a program renamed in policy.bpf.c
 * fails to compile here rather than to attach).
 */
#define POLICY_MEMBERS(X) \
	X(init, pce_init) \
	X(evict_folios, pce_evict_folios) \
	X(folio_added, pce_folio_added) \
	X(folio_accessed, pce_folio_accessed) \
	X(folio_evicted, pce_folio_evicted)
	/* admit_folio: left NULL (its kernel path is unsafe; policy.bpf.c) */

struct member_prog
{
	const char *member;
	struct bpf_program *prog;
	const char *prog_name;
};

/* ------------------------------------------------------------------ */
/* libbpf messages: keep the last meaningful line for the one-line reason */
/* ------------------------------------------------------------------ */

static char last_libbpf_line[256];
static bool verbose_libbpf;

static int
capture_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char		buf[1024];
	char	   *line,
			   *save = NULL;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (verbose_libbpf)
		fputs(buf, stderr);
	if (level == LIBBPF_DEBUG)
		return 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
	{
		/* skip the noise around verifier logs */
		if (strspn(line, " -\t") == strlen(line) || strstr(line, "-- BEGIN") || strstr(line, "-- END") ||
			strncmp(line, "processed ", 10) == 0)
			continue;
		snprintf(last_libbpf_line, sizeof(last_libbpf_line), "%s", line);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Kernel BTF                                                          */
/* ------------------------------------------------------------------ */

bool
pce_kernel_btf_has_cache_ext_ops(char *why, size_t whylen)
{
	struct btf *vmlinux = btf__load_vmlinux_btf();
	bool		found;

	if (!vmlinux)
	{
		snprintf(why, whylen, "cannot read the kernel's BTF (/sys/kernel/btf/vmlinux)");
		return false;
	}
	found = btf__find_by_name_kind(vmlinux, "cache_ext_ops", BTF_KIND_STRUCT) >= 0;
	snprintf(why, whylen, found ? "struct cache_ext_ops found in the kernel's BTF"
			 : "no struct cache_ext_ops in the kernel's BTF");
	btf__free(vmlinux);
	return found;
}

/* Value of enumerator name in enum enum_name of the kernel's BTF, or -1. */
static long long
kernel_enum_value(const struct btf *btf, const char *enum_name, const char *name)
{
	int			id = btf__find_by_name_kind(btf, enum_name, BTF_KIND_ENUM);
	const struct btf_type *t;
	const struct btf_enum *e;

	if (id < 0)
		return -1;
	t = btf__type_by_id(btf, id);
	e = btf_enum(t);
	for (int i = 0; i < btf_vlen(t); i++, e++)
		if (strcmp(btf__name_by_offset(btf, e->name_off), name) == 0)
			return e->val;
	return -1;
}

/* Byte offset of member name in struct type_id, or -1. */
static long
member_offset(const struct btf *btf, int type_id, const char *name)
{
	const struct btf_type *t = btf__type_by_id(btf, type_id);
	const struct btf_member *m = btf_members(t);

	for (int i = 0; i < btf_vlen(t); i++, m++)
		if (strcmp(btf__name_by_offset(btf, m->name_off), name) == 0)
			return btf_member_bit_offset(t, i) / 8;
	return -1;
}

/*
 * Build the value of the struct_ops map as the running kernel lays it out
 * (struct bpf_struct_ops_cache_ext_ops { refcnt; state; struct cache_ext_ops data; })
 * with each callback member holding its program's fd, and write it.
 */
static int
write_struct_ops_value(const struct btf *btf, struct policy_bpf *skel, char *why, size_t whylen)
{
	int			value_id = btf__find_by_name_kind(btf, "bpf_struct_ops_cache_ext_ops", BTF_KIND_STRUCT);
	int			ops_id = btf__find_by_name_kind(btf, "cache_ext_ops", BTF_KIND_STRUCT);
	long		data_off,
				size;
	char	   *value;
	__u32		zero = 0;
	int			err;
#define MEMBER_PROG(member, prog) {#member, skel->progs.prog, #prog},
	const struct member_prog members[] = {POLICY_MEMBERS(MEMBER_PROG)};
#undef MEMBER_PROG

	if (value_id < 0 || ops_id < 0)
	{
		snprintf(why, whylen, "kernel BTF lacks struct bpf_struct_ops_cache_ext_ops");
		return -ENOENT;
	}
	data_off = member_offset(btf, value_id, "data");
	size = btf__resolve_size(btf, value_id);
	if (data_off < 0 || size <= 0)
	{
		snprintf(why, whylen, "unexpected layout of struct bpf_struct_ops_cache_ext_ops");
		return -EINVAL;
	}
	value = calloc(1, size);
	if (!value)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++)
	{
		long		moff = member_offset(btf, ops_id, members[i].member);
		struct bpf_program *prog = members[i].prog;

		if (moff < 0)
		{
			/* a kernel without this callback: leave it out */
			continue;
		}
		if (!prog || bpf_program__fd(prog) < 0)
		{
			snprintf(why, whylen, "program %s missing from the policy object", members[i].prog_name);
			free(value);
			return -ENOENT;
		}
		*(unsigned long *) (value + data_off + moff) = bpf_program__fd(prog);
	}
	err = bpf_map_update_elem(bpf_map__fd(skel->maps.pce_policy_ops), &zero, value, 0);
	if (err)
	{
		err = -errno;
		snprintf(why, whylen, "cannot write the struct_ops value: %s", strerror(-err));
	}
	free(value);
	return err;
}

/* ------------------------------------------------------------------ */
/* cgroup checks                                                       */
/* ------------------------------------------------------------------ */

/*
 * The research kernel allocates its per-cgroup folio index (and so calls a
 * policy at all) only for memory cgroups whose name starts with "cache_ext"
 * (mem_cgroup_css_online() in its mm/memcontrol.c).  A link on any other
 * cgroup is accepted but the policy never runs.
 */
#define PCE_CGROUP_NAME_PREFIX "cache_ext"

bool
pce_cgroup_name_enables_cache_ext(const char *cgroup_path)
{
	char		copy[4096];
	char	   *end,
			   *base;

	snprintf(copy, sizeof(copy), "%s", cgroup_path);
	end = copy + strlen(copy);
	while (end > copy + 1 && end[-1] == '/')
		*--end = '\0';
	base = strrchr(copy, '/');
	base = base ? base + 1 : copy;
	return strncmp(base, PCE_CGROUP_NAME_PREFIX, strlen(PCE_CGROUP_NAME_PREFIX)) == 0;
}

/*
 * Open cgroup_path once: no symlink anywhere in it, a cgroup v2 directory
 * by its fd's filesystem; name gets the path the kernel gives that fd
 * (what was opened, whatever the path names later).
 */
int
pce_open_cgroup(const char *cgroup_path, char *name, size_t namelen, char *why, size_t whylen)
{
	struct statfs st;
	char		link[64];
	ssize_t		n;
	int			fd = pce_openat2(AT_FDCWD, cgroup_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
								 RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);

	if (fd < 0)
	{
		int			err = -errno;

		snprintf(why, whylen, "cannot open cgroup \"%s\": %s", cgroup_path, pce_open_error(-err));
		return err;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if (fstatfs(fd, &st) != 0 || st.f_type != CGROUP2_SUPER_MAGIC)
	{
		close(fd);
		snprintf(why, whylen, "\"%s\" is not a cgroup v2 directory (cache_ext needs cgroup v2; cgroup v1 only?)",
				 cgroup_path);
		return -EMEDIUMTYPE;
	}
	n = readlink(link, name, namelen - 1);
	if (n <= 0 || (size_t) n >= namelen - 1)
	{
		close(fd);
		snprintf(why, whylen, "cannot resolve the cgroup opened as \"%s\" (is /proc mounted?)", cgroup_path);
		return -ENOENT;
	}
	name[n] = '\0';
	return fd;
}

/* cgroup v2 id of a directory: its file handle (as the kernel's cgroup_id()). */
static __u64
cgroup_id_of(int cgroup_fd)
{
	union
	{
		struct file_handle fh;
		char		buf[sizeof(struct file_handle) + 64];
	}			h;
	__u64		id;
	int			mount_id;

	memset(&h, 0, sizeof(h));
	h.fh.handle_bytes = 64;
	if (name_to_handle_at(cgroup_fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) != 0 ||
		h.fh.handle_bytes < sizeof(id))
		return 0;
	memcpy(&id, h.fh.f_handle, sizeof(id));
	return id;
}

/*
 * A link's type, id and cgroup id.  A cache_ext struct_ops link holds its
 * cgroup's id where a cgroup link does (the first member of struct
 * bpf_link_info's union); the build machine's headers do not describe the
 * cache_ext kernel's struct_ops link, so the cgroup link's member names
 * the place.  False if the kernel gives no information.
 */
static bool
link_info_cgroup(int fd, __u32 *type, __u32 *id, __u64 *cgid)
{
	unsigned char info[256];
	__u32		len = sizeof(info);

	_Static_assert(sizeof(info) >= sizeof(struct bpf_link_info), "info holds a bpf_link_info");
	memset(info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, info, &len) != 0)
		return false;
	memcpy(type, info + offsetof(struct bpf_link_info, type), sizeof(*type));
	memcpy(id, info + offsetof(struct bpf_link_info, id), sizeof(*id));
	memcpy(cgid, info + offsetof(struct bpf_link_info, cgroup.cgroup_id), sizeof(*cgid));
	return true;
}

/*
 * Does some cache_ext link already serve this cgroup?  The research kernel
 * does not refuse a second link on a cgroup (it silently replaces the
 * first, and the first one's teardown would then free the second one's
 * lists), so look before attaching.  The link info of a cache_ext link has
 * { __u64 cgroup_id; __u32 map_id; } right after type, id and prog_id.
 */
static __u32
existing_cache_ext_link(const struct btf *btf, __u64 cgid)
{
	long long	link_type = kernel_enum_value(btf, "bpf_link_type", "BPF_LINK_TYPE_CACHE_EXT_OPS");
	__u32		id = 0;

	if (link_type < 0 || cgid == 0)
		return 0;
	while (bpf_link_get_next_id(id, &id) == 0)
	{
		__u32		type,
					link_id;
		__u64		link_cgid;
		int			fd = bpf_link_get_fd_by_id(id);

		if (fd < 0)
			continue;
		if (!link_info_cgroup(fd, &type, &link_id, &link_cgid))
		{
			close(fd);
			continue;
		}
		if (type == (__u32) link_type && link_cgid == cgid)
		{
			close(fd);
			return id;
		}
		close(fd);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Pins                                                                */
/* ------------------------------------------------------------------ */

static int
pin_fd(int fd, const struct pce_pins *pins, const char *name, char *why, size_t whylen)
{
	char		path[4096];

	if (bpf_obj_pin(fd, pce_pin_path(pins, name, path, sizeof(path))) != 0)
	{
		int			err = -errno;

		snprintf(why, whylen, "cannot pin \"%s/%s\": %s", pins->shown, name, strerror(-err));
		return err;
	}
	if (pce_pin_keep_root(pins->dir_fd, name, why, whylen) != 0)	/* the server never opens it */
		return -EPERM;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Attach / detach                                                     */
/* ------------------------------------------------------------------ */

/* The kernel's cache_ext attach type, or -1 with why; *btf gets the kernel's BTF. */
static long long
cache_ext_attach_type(struct btf **btf, char *why, size_t whylen)
{
	long long	attach_type;

	*btf = btf__load_vmlinux_btf();
	if (!*btf || btf__find_by_name_kind(*btf, "cache_ext_ops", BTF_KIND_STRUCT) < 0)
	{
		snprintf(why, whylen, "the running kernel has no cache_ext (no struct cache_ext_ops in its BTF)");
		return -1;
	}
	attach_type = kernel_enum_value(*btf, "bpf_attach_type", "BPF_CACHE_EXT_OPS");
	if (attach_type < 0)
		snprintf(why, whylen, "kernel BTF has cache_ext_ops but no BPF_CACHE_EXT_OPS attach type");
	return attach_type;
}

/* May a policy go on this cgroup?  0, or a negative errno with why. */
static int
check_cgroup_free(const struct btf *btf, int cgroup_fd, const char *cgroup_name, char *why, size_t whylen)
{
	__u32		other;

	if (!pce_cgroup_name_enables_cache_ext(cgroup_name))
	{
		snprintf(why, whylen, "cgroup %s: the cache_ext kernel only runs policies on cgroups whose name "
				 "starts with \"%s\" (others are silently ignored); use such a child cgroup",
				 cgroup_name, PCE_CGROUP_NAME_PREFIX);
		return -EINVAL;
	}
	other = existing_cache_ext_link(btf, cgroup_id_of(cgroup_fd));
	if (other)
	{
		snprintf(why, whylen, "cgroup %s already has a cache_ext policy (link id %u)", cgroup_name, other);
		return -EEXIST;
	}
	return 0;
}

/* Open and load policy.bpf.c reusing the pinned maps; NULL with why. */
static struct policy_bpf *
load_policy_object(const struct pce_pins *pins, char *why, size_t whylen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = pins->via_fd);
	libbpf_print_fn_t old_print;
	struct policy_bpf *skel;
	int			err;

	last_libbpf_line[0] = '\0';
	old_print = libbpf_set_print(capture_libbpf);
	skel = policy_bpf__open_opts(&oo);
	if (!skel)
	{
		err = -errno;
		libbpf_set_print(old_print);
		snprintf(why, whylen, "cannot open the policy object: %s", last_libbpf_line[0] ? last_libbpf_line : strerror(-err));
		return NULL;
	}
	bpf_program__set_flags(skel->progs.pce_init,
						   bpf_program__flags(skel->progs.pce_init) | BPF_F_SLEEPABLE);
	bpf_map__set_map_flags(skel->maps.pce_policy_ops,
						   bpf_map__map_flags(skel->maps.pce_policy_ops) | BPF_F_LINK);
	err = policy_bpf__load(skel);
	libbpf_set_print(old_print);
	if (err)
	{
		snprintf(why, whylen, "the kernel rejected the policy: %s",
				 last_libbpf_line[0] ? last_libbpf_line : strerror(-err));
		policy_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

/* Pin the struct_ops map, replacing a stale pin of an earlier policy without link. */
static int
pin_policy_map(struct policy_bpf *skel, const struct pce_pins *pins, char *why, size_t whylen)
{
	int			err = pin_fd(bpf_map__fd(skel->maps.pce_policy_ops), pins, PCE_PIN_POLICY_MAP, why, whylen);

	if (err == -EEXIST)
	{
		unlinkat(pins->dir_fd, PCE_PIN_POLICY_MAP, 0);
		err = pin_fd(bpf_map__fd(skel->maps.pce_policy_ops), pins, PCE_PIN_POLICY_MAP, why, whylen);
	}
	return err;
}

/* BPF_LINK_CREATE on the cgroup's fd; the link fd, or a negative errno with why. */
static int
create_policy_link(struct policy_bpf *skel, int cgroup_fd, const char *cgroup_name,
				   long long attach_type, char *why, size_t whylen)
{
	int			link_fd = bpf_link_create(bpf_map__fd(skel->maps.pce_policy_ops), cgroup_fd,
										  (enum bpf_attach_type) attach_type, NULL);
	int			err = -errno;

	if (link_fd >= 0)
		return link_fd;
	if (err == -EEXIST || err == -EBUSY)
		snprintf(why, whylen, "cgroup %s already has a cache_ext policy (%s)", cgroup_name, strerror(-err));
	else if (err == -EINVAL)
		snprintf(why, whylen, "the kernel refused the cache_ext link on %s (EINVAL: policy init failed, "
				 "or no memory controller on this cgroup)", cgroup_name);
	else
		snprintf(why, whylen, "cannot attach the policy to %s: %s", cgroup_name, strerror(-err));
	return err;
}

int
pce_attach_policy(const struct pce_pins *pins, int cgroup_fd, const char *cgroup_name,
				  char *why, size_t whylen)
{
	struct policy_bpf *skel = NULL;
	struct btf *btf = NULL;
	long long	attach_type;
	int			link_fd = -1,
				err;

	verbose_libbpf = getenv("PCE_LIBBPF_VERBOSE") != NULL;
	snprintf(why, whylen, "unknown error");
	if (pce_pin_exists(pins, PCE_PIN_POLICY_LINK))
	{
		snprintf(why, whylen, "a policy link is already pinned at %s/%s (detach it first)",
				 pins->shown, PCE_PIN_POLICY_LINK);
		return -EEXIST;
	}
	attach_type = cache_ext_attach_type(&btf, why, whylen);
	err = attach_type < 0 ? -EOPNOTSUPP : check_cgroup_free(btf, cgroup_fd, cgroup_name, why, whylen);
	if (err == 0 && (skel = load_policy_object(pins, why, whylen)) == NULL)
		err = -EINVAL;
	if (err == 0)
		err = write_struct_ops_value(btf, skel, why, whylen);
	/* The map outlives the link (see the header comment): pin it first. */
	if (err == 0)
		err = pin_policy_map(skel, pins, why, whylen);
	if (err == 0 && (link_fd = create_policy_link(skel, cgroup_fd, cgroup_name, attach_type, why, whylen)) < 0)
	{
		err = link_fd;
		unlinkat(pins->dir_fd, PCE_PIN_POLICY_MAP, 0);
	}
	/* Pin at once: the link must not be freed by this process exiting. */
	if (err == 0)
		err = pin_fd(link_fd, pins, PCE_PIN_POLICY_LINK, why, whylen);
	if (err == 0)
		snprintf(why, whylen, "cache_ext policy attached to %s (attach type %lld)", cgroup_name, attach_type);
	if (link_fd >= 0)
		close(link_fd);
	policy_bpf__destroy(skel);
	btf__free(btf);
	return err;
}

/*
 * Quiesce the cgroup before the link goes away.
 *
 * The research kernel tears a policy down in the link's dealloc: it frees
 * the lists with list_del() (leaving LIST_POISON in every node still on a
 * list) and only afterwards re-initialises the nodes, while the cgroup's
 * cache_ext callbacks and the kernel's own valid_folios_del() keep running.
 * A folio removed from the page cache in that window is list_del()'d a
 * second time through the poison: general protection fault (seen in the
 * lab, in cache_ext_list_del() called from folio_evicted, whenever a reader
 * in the cgroup was under memory.max pressure during the detach).  So:
 *
 *	1. lift memory.high and memory.max to "max", so that no charge in the
 *	   cgroup triggers reclaim (page-cache removals) during the teardown;
 *	2. reclaim the cgroup's page cache (memory.reclaim) through the policy
 *	   itself: every evicted folio leaves its list, and the teardown finds
 *	   (nearly) empty lists;
 *	3. (caller) drop the link; 4. restore the limits.
 *
 * What is lost: the cgroup's clean page cache, once, and for the moment of
 * the teardown its memory limits.  Truncations (DROP TABLE) during those
 * milliseconds are still exposed; that needs the kernel fixed.
 */
struct cgroup_quiesce
{
	int			cg_fd;
	char		saved_max[64];
	char		saved_high[64];
	long long	drained;
};

static bool
cg_read(int cg_fd, const char *file, char *buf, size_t len)
{
	int			fd = openat(cg_fd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t		n = -1;

	if (fd >= 0)
	{
		n = read(fd, buf, len - 1);
		close(fd);
	}
	if (n <= 0)
		return false;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return true;
}

static bool
cg_write(int cg_fd, const char *file, const char *val)
{
	int			fd = openat(cg_fd, file, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	bool		ok;

	if (fd < 0)
		return false;
	/* memory.reclaim says EAGAIN when not all of it could go: fine */
	ok = write(fd, val, strlen(val)) >= 0 || errno == EAGAIN;
	close(fd);
	return ok;
}

static void
quiesce_cgroup(__u64 cgid, struct cgroup_quiesce *q)
{
	union
	{
		struct file_handle fh;
		char		buf[sizeof(struct file_handle) + 8];
	}			h;
	char		cur[64];
	int			mnt_fd;

	memset(q, 0, sizeof(*q));
	q->cg_fd = -1;
	q->drained = -1;
	if (cgid == 0 || getenv("PCE_DETACH_NO_QUIESCE"))
		return;
	mnt_fd = open("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mnt_fd < 0)
		return;
	h.fh.handle_bytes = sizeof(cgid);
	h.fh.handle_type = 0xfe;	/* FILEID_KERNFS: the handle of a cgroup is its id */
	memcpy(h.fh.f_handle, &cgid, sizeof(cgid));
	q->cg_fd = open_by_handle_at(mnt_fd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(mnt_fd);
	if (q->cg_fd < 0)
		return;
	if (cg_read(q->cg_fd, "memory.max", q->saved_max, sizeof(q->saved_max)))
		cg_write(q->cg_fd, "memory.max", "max");
	if (cg_read(q->cg_fd, "memory.high", q->saved_high, sizeof(q->saved_high)))
		cg_write(q->cg_fd, "memory.high", "max");
	if (cg_read(q->cg_fd, "memory.current", cur, sizeof(cur)) && atoll(cur) > 0 &&
		cg_write(q->cg_fd, "memory.reclaim", cur))
		q->drained = atoll(cur);
}

static void
unquiesce_cgroup(struct cgroup_quiesce *q)
{
	if (q->cg_fd < 0)
		return;
	if (q->saved_high[0])
		cg_write(q->cg_fd, "memory.high", q->saved_high);
	if (q->saved_max[0] && !cg_write(q->cg_fd, "memory.max", q->saved_max))
		fprintf(stderr, "pg_cache_ext_loader: warning: cannot restore memory.max %s: %s\n",
				q->saved_max, strerror(errno));
	close(q->cg_fd);
	q->cg_fd = -1;
}

/* The id of the pinned struct_ops map, or 0. */
static __u32
pinned_map_id(const struct pce_pins *pins)
{
	char		path[4096];
	struct bpf_map_info minfo;
	__u32		mlen = sizeof(minfo);
	__u32		id = 0;
	int			fd = bpf_obj_get(pce_pin_path(pins, PCE_PIN_POLICY_MAP, path, sizeof(path)));

	if (fd >= 0)
	{
		memset(&minfo, 0, sizeof(minfo));
		if (bpf_obj_get_info_by_fd(fd, &minfo, &mlen) == 0)
			id = minfo.id;
		close(fd);
	}
	return id;
}

/* The pinned link's id and its cgroup's id (link info: type, id, prog_id, cgroup_id). */
static void
pinned_link_ids(const struct pce_pins *pins, __u32 *link_id, __u64 *cgid)
{
	char		path[4096];
	__u32		type;
	int			fd = bpf_obj_get(pce_pin_path(pins, PCE_PIN_POLICY_LINK, path, sizeof(path)));

	*link_id = 0;
	*cgid = 0;
	if (fd < 0)
		return;
	if (!link_info_cgroup(fd, &type, link_id, cgid))
	{
		*link_id = 0;
		*cgid = 0;
	}
	close(fd);
}

bool
pce_policy_serves_cgroup(const struct pce_pins *pins, int cgroup_fd)
{
	__u32		link_id;
	__u64		cgid;
	__u64		want = cgroup_id_of(cgroup_fd);

	pinned_link_ids(pins, &link_id, &cgid);
	return link_id != 0 && want != 0 && cgid == want;
}

/* Up to 60 s: the teardown walks the whole folio index of the cgroup. */
static void
wait_map_freed(__u32 map_id)
{
	for (int i = 0; map_id && i < 6000; i++)
	{
		int			mfd = bpf_map_get_fd_by_id(map_id);

		if (mfd < 0 && errno == ENOENT)
			break;
		if (mfd >= 0)
			close(mfd);
		usleep(10000);
	}
}

static int
unpin_policy(const struct pce_pins *pins, const char *name, char *why, size_t whylen)
{
	if (unlinkat(pins->dir_fd, name, 0) != 0 && errno != ENOENT)
	{
		int			err = -errno;

		snprintf(why, whylen, "cannot unpin \"%s/%s\": %s", pins->shown, name, strerror(-err));
		return err;
	}
	return 0;
}

int
pce_detach_policy(const struct pce_pins *pins, char *why, size_t whylen)
{
	__u32		link_id,
				map_id = pinned_map_id(pins);
	__u64		cgid;
	struct cgroup_quiesce q = {.cg_fd = -1, .drained = -1};
	int			err;

	/*
	 * Order matters on the research kernel (see quiesce_cgroup()): quiesce,
	 * drop the link, drop the map, then wait until the kernel has freed the
	 * map, which its link teardown does only after unregistering the
	 * policy (the teardown may run later, from a workqueue), and only then
	 * give the cgroup its limits back.  The cgroup is the link's own (by
	 * id), not one named by a path.
	 */
	pinned_link_ids(pins, &link_id, &cgid);
	if (link_id)
		quiesce_cgroup(cgid, &q);
	err = unpin_policy(pins, PCE_PIN_POLICY_LINK, why, whylen);
	if (err == 0)
		err = unpin_policy(pins, PCE_PIN_POLICY_MAP, why, whylen);
	if (err == 0)
		wait_map_freed(map_id);
	unquiesce_cgroup(&q);
	if (err)
		return err;
	if (link_id)
		fprintf(stderr, "pg_cache_ext_loader: cache_ext policy link %u detached: the cgroup's page cache is "
				"back under the kernel's LRU; the policy's scan/main lists are freed%s\n", link_id,
				q.drained > 0 ? " (the cgroup's page cache was reclaimed first to empty them)" : "");
	snprintf(why, whylen, link_id ? "policy link %u detached" : "no policy link was pinned", link_id);
	return 0;
}
