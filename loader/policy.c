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
 *	- link teardown frees the lists leaving poisoned nodes while callbacks
 *	  still run: a list call or a page-cache removal of a listed folio at
 *	  that moment oopses (GPF at 0xdead000000000100/108 in
 *	  cache_ext_list_move/del).  pce_detach_policy() first walks the policy
 *	  through its detach phases (policy_state pin), empties its lists, and
 *	  lifts the cgroup's limits only for the teardown, with a record that
 *	  survives the loader (see "Detach" below).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
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

/*
 * Is MGLRU on?  Then memcg reclaim takes lru_gen_shrink_lruvec() and never
 * reaches cache_ext's hook in shrink_lruvec(): an attached policy would
 * list folios and never evict one.  Bit 0 of lru_gen/enabled is the core
 * switch.  PCE_LRU_GEN_FILE names another file (the lab's kernel has no
 * MGLRU to turn on; its test uses this).
 */
static bool
mglru_enabled(char *val, size_t vallen)
{
	const char *file = getenv("PCE_LRU_GEN_FILE") ? getenv("PCE_LRU_GEN_FILE") : "/sys/kernel/mm/lru_gen/enabled";
	FILE	   *f = fopen(file, "re");
	bool		on = false;

	snprintf(val, vallen, "absent");
	if (!f)
		return false;
	if (fgets(val, vallen, f))
	{
		val[strcspn(val, "\n")] = '\0';
		on = (strtoul(val, NULL, 16) & 1) != 0;
	}
	fclose(f);
	return on;
}

/* May a policy go on this cgroup?  0, or a negative errno with why. */
static int
check_cgroup_free(const struct btf *btf, int cgroup_fd, const char *cgroup_name, char *why, size_t whylen)
{
	__u32		other;
	char		lru_gen[32];

	if (mglru_enabled(lru_gen, sizeof(lru_gen)))
	{
		snprintf(why, whylen, "MGLRU is enabled (lru_gen/enabled = %s): memory-cgroup reclaim then bypasses "
				 "cache_ext and the policy would never evict; turn it off (echo n > "
				 "/sys/kernel/mm/lru_gen/enabled) or use the stock mechanism", lru_gen);
		return -EOPNOTSUPP;
	}
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

/*
 * PCE_POLICY_MAX_FOLIOS: how many folios the policy can hold (its
 * folio_lists map; default 2^21, 8 GiB of 4 KiB folios).  Beyond, folios
 * are left to the kernel's LRU and counted as folios_untracked.
 */
static void
set_folio_capacity(struct policy_bpf *skel)
{
	const char *env = getenv("PCE_POLICY_MAX_FOLIOS");
	long long	n = env ? atoll(env) : 0;

	if (n >= 1024 && n <= (1LL << 28))
		bpf_map__set_max_entries(skel->maps.folio_lists, (__u32) n);
	else if (env)
		fprintf(stderr, "pg_cache_ext_loader: warning: PCE_POLICY_MAX_FOLIOS=%s ignored (1024 .. 268435456)\n", env);
}

/* Open and load policy.bpf.c reusing the pinned maps; NULL with why. */
static struct policy_bpf *
load_policy_object(const struct pce_pins *pins, uid_t cluster_uid, char *why, size_t whylen)
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
	set_folio_capacity(skel);
	skel->rodata->cluster_uid = cluster_uid;	/* I/O workers' and scan files' owner (maps.bpf.h) */
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

/*
 * A fresh policy_state (pinned by name, so possibly left by an earlier
 * policy whose detach finished or was finished by
 * pce_policy_resume_interrupted()): ACTIVE, no record.
 */
static int
reset_policy_state(struct policy_bpf *skel, char *why, size_t whylen)
{
	struct pce_policy_state fresh = {.phase = PCE_POLICY_ACTIVE},
				old;
	__u32		zero = 0;

	/* pce_policy_resume_interrupted() cleared any record; never overwrite one */
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.policy_state), &zero, &old) == 0 && old.limits_saved)
	{
		snprintf(why, whylen, "the policy's state holds an unrestored record of a cgroup's limits");
		return -EBUSY;
	}
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.policy_state), &zero, &fresh, BPF_ANY) != 0)
	{
		snprintf(why, whylen, "cannot reset the policy's state map: %s", strerror(errno));
		return -errno;
	}
	return 0;
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
				  uid_t cluster_uid, char *why, size_t whylen)
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
	/* an earlier detach's record is restored first, or nothing starts (it is never overwritten) */
	err = pce_policy_resume_interrupted(pins, why, whylen);
	if (err)
		return err;
	attach_type = cache_ext_attach_type(&btf, why, whylen);
	err = attach_type < 0 ? -EOPNOTSUPP : check_cgroup_free(btf, cgroup_fd, cgroup_name, why, whylen);
	if (err == 0 && (skel = load_policy_object(pins, cluster_uid, why, whylen)) == NULL)
		err = -EINVAL;
	if (err == 0)
		err = reset_policy_state(skel, why, whylen);
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

/* ------------------------------------------------------------------ */
/* The policy's shared state (pin policy_state)                        */
/* ------------------------------------------------------------------ */

/*
 * Map the policy_state pin (struct pce_policy_state, mmap-able).  It is
 * trusted only as the loader leaves it: a regular pin, root's, mode 0600,
 * an array of one entry of the expected size.  NULL if absent or not so.
 */
static struct pce_policy_state *
map_policy_state(const struct pce_pins *pins)
{
	char		path[4096];
	struct bpf_map_info info;
	__u32		len = sizeof(info);
	struct stat st;
	void	   *mem = MAP_FAILED;
	int			fd;

	if (fstatat(pins->dir_fd, PCE_PIN_POLICY_STATE, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077) != 0)
		return NULL;
	fd = bpf_obj_get(pce_pin_path(pins, PCE_PIN_POLICY_STATE, path, sizeof(path)));
	if (fd < 0)
		return NULL;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.type == BPF_MAP_TYPE_ARRAY &&
		info.max_entries == 1 && info.value_size == sizeof(struct pce_policy_state) &&
		(info.map_flags & BPF_F_MMAPABLE))
		mem = mmap(NULL, sizeof(struct pce_policy_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return mem == MAP_FAILED ? NULL : mem;
}

static void
unmap_policy_state(struct pce_policy_state *st)
{
	if (st)
		munmap(st, sizeof(*st));
}

/*
 * Wait until no policy callback that may have seen the previous phase is
 * still running.  Callbacks are RCU readers (the BPF trampoline holds
 * rcu_read_lock()), and MEMBARRIER_CMD_GLOBAL is a synchronize_rcu() in
 * the kernel.  Kernels that refuse it (nohz_full) get a generous pause,
 * and so do single-CPU machines, where it returns at once without one (a
 * preemptible kernel may have preempted a callback).
 */
static void
wait_for_callbacks(void)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 ||
		syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0)
		usleep(200000);
}

static void
set_phase(struct pce_policy_state *st, enum pce_policy_phase phase)
{
	__atomic_store_n(&st->phase, (__u32) phase, __ATOMIC_SEQ_CST);
	wait_for_callbacks();
}

static long long
listed_folios(const struct pce_policy_state *st)
{
	long long	n = __atomic_load_n(&st->nr_scan_folios, __ATOMIC_RELAXED) +
		__atomic_load_n(&st->nr_main_folios, __ATOMIC_RELAXED);

	return n > 0 ? n : 0;
}

/* ------------------------------------------------------------------ */
/* The cgroup's files                                                  */
/* ------------------------------------------------------------------ */

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

/* The cgroup with this id, opened by handle (never by a path); -1 if gone. */
static int
open_cgroup_by_id(__u64 cgid)
{
	union
	{
		struct file_handle fh;
		char		buf[sizeof(struct file_handle) + 8];
	}			h;
	int			mnt_fd,
				fd;

	if (cgid == 0)
		return -1;
	mnt_fd = open("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mnt_fd < 0)
		return -1;
	h.fh.handle_bytes = sizeof(cgid);
	h.fh.handle_type = 0xfe;	/* FILEID_KERNFS: the handle of a cgroup is its id */
	memcpy(h.fh.f_handle, &cgid, sizeof(cgid));
	fd = open_by_handle_at(mnt_fd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(mnt_fd);
	return fd;
}

/* ------------------------------------------------------------------ */
/* Detach                                                              */
/* ------------------------------------------------------------------ */

/*
 * How the detach gets past the research kernel's teardown (its race is
 * described at the top of bpf/policy.bpf.c):
 *
 *	1. DRAINING: the policy lists nothing new and moves nothing;
 *	2. the lists are emptied by reclaiming, through the policy, as many
 *	   pages as it holds (memory.reclaim; a sync() between rounds, since
 *	   dirty folios cannot be evicted): only what it listed, not the
 *	   cgroup's whole usage, and not its anonymous memory first;
 *	3. the cgroup's memory.max and memory.high are recorded in policy_state
 *	   with the id of the struct_ops map, and lifted, so that no charge
 *	   reclaims (removes folios) while the kernel frees the lists, in case
 *	   some folio is still listed;
 *	4. UNLINKING: no list call at all; the link and the struct_ops map are
 *	   unpinned;
 *	5. the loader waits until the kernel has freed that map: the link's
 *	   teardown (bpf_cache_ext_ops_map_link_dealloc()) frees the lists in
 *	   unreg() and only then drops its reference to the map, so a map id
 *	   that no longer resolves means the lists are gone;
 *	6. only then are the limits put back and the record cleared.
 *
 * The record outlives the loader: a run killed between 3 and 6, an unpin
 * that failed, or a teardown slower than PCE_TEARDOWN_WAIT_SECONDS (60 s)
 * leaves the limits lifted and the record kept, and the run says so and
 * fails.  The next run finishes (pce_policy_resume_interrupted()): with the
 * link still pinned the teardown never began (the policy serves again and
 * the limits come back); without it, the map pin is removed if still there
 * and the limits come back once the map is freed, never before.  While a
 * record is kept no attach or detach starts, so it is never overwritten.
 * What is still exposed: a folio still listed (a re-dirtied one, one
 * reclaim could not take) that is truncated during the teardown's
 * milliseconds; that needs the kernel fixed.  Draining in up to 40 rounds
 * (at least ~2 s when folios stay listed: each round after the first
 * waits for a sync()) and unlisting the folios accessed meanwhile left
 * folios listed in 4, 6 and 4 of three runs of 60 lab detaches with busy
 * readers (1-23 folios; lab scenario detach-stress), and no crash; with 4
 * rounds and no unlisting, the same run crashed the kernel after 48 detaches.
 */
#define PCE_DRAIN_ROUNDS	40		/* >= ~2 s: every listed folio left risks the teardown */
#define PCE_TEARDOWN_WAIT_DEFAULT	60	/* seconds; the teardown walks the cgroup's folio index */

/* Steps 1-2; the number of folios still listed. */
static long long
drain_lists(int cg_fd, struct pce_policy_state *st)
{
	long		page = sysconf(_SC_PAGESIZE);
	long long	left;

	set_phase(st, PCE_POLICY_DRAINING);
	left = listed_folios(st);
	for (int round = 0; cg_fd >= 0 && left > 0 && round < PCE_DRAIN_ROUNDS; round++)
	{
		char		amount[32],
					cur[32];
		long long	bytes = left * page;

		if (round > 0)
		{
			sync();				/* dirty folios cannot be evicted */
			usleep(50000);		/* nor folios under read I/O (locked) */
		}
		if (cg_read(cg_fd, "memory.current", cur, sizeof(cur)) && atoll(cur) < bytes)
			bytes = atoll(cur);
		if (bytes <= 0)
			break;
		snprintf(amount, sizeof(amount), "%lld", bytes);
		cg_write(cg_fd, "memory.reclaim", amount);
		left = listed_folios(st);
	}
	return left;
}

/* "memory.max M, memory.high H" of the record, for messages. */
static const char *
record_text(const struct pce_policy_state *st, char *buf, size_t len)
{
	snprintf(buf, len, "memory.max %.*s, memory.high %.*s", PCE_LIMIT_TEXT_MAX, st->saved_max,
			 PCE_LIMIT_TEXT_MAX, st->saved_high);
	return buf;
}

/*
 * Step 3: the record first, then the limits.  A record still kept (which
 * pce_policy_resume_interrupted() could not restore) is never overwritten.
 */
static int
lift_limits(int cg_fd, __u64 cgid, __u32 map_id, struct pce_policy_state *st, char *why, size_t whylen)
{
	char		text[2 * PCE_LIMIT_TEXT_MAX + 40];

	if (__atomic_load_n(&st->limits_saved, __ATOMIC_SEQ_CST))
	{
		snprintf(why, whylen, "an earlier detach's record of cgroup %llu's limits (%s) is not restored yet",
				 (unsigned long long) st->saved_cgroup_id, record_text(st, text, sizeof(text)));
		return -EBUSY;
	}
	if (cg_fd < 0)
		return 0;
	memset(st->saved_max, 0, sizeof(st->saved_max));
	memset(st->saved_high, 0, sizeof(st->saved_high));
	if (!cg_read(cg_fd, "memory.max", st->saved_max, sizeof(st->saved_max)) ||
		!cg_read(cg_fd, "memory.high", st->saved_high, sizeof(st->saved_high)))
		return 0;
	st->saved_cgroup_id = cgid;
	st->teardown_map_id = map_id;
	__atomic_store_n(&st->limits_saved, 1, __ATOMIC_SEQ_CST);
	cg_write(cg_fd, "memory.high", "max");
	cg_write(cg_fd, "memory.max", "max");
	/* the lab's test of a loader killed during a detach (test/lab/inside-files.sh) */
	if (getenv("PCE_TEST_KILL_DURING_DETACH"))
		kill(getpid(), SIGKILL);
	return 0;
}

/*
 * Step 6, and the next run's repair: put the recorded limits back.  0 when
 * restored, or when the cgroup is gone (no limits to restore): the record
 * is cleared; a negative errno with why when they could not be written:
 * the record is kept.
 */
static int
restore_limits(struct pce_policy_state *st, char *why, size_t whylen)
{
	char		max[PCE_LIMIT_TEXT_MAX + 1],
				high[PCE_LIMIT_TEXT_MAX + 1],
				text[2 * PCE_LIMIT_TEXT_MAX + 40];
	int			cg_fd,
				err = 0;

	if (!__atomic_load_n(&st->limits_saved, __ATOMIC_SEQ_CST))
		return 0;
	snprintf(max, sizeof(max), "%.*s", PCE_LIMIT_TEXT_MAX, st->saved_max);
	snprintf(high, sizeof(high), "%.*s", PCE_LIMIT_TEXT_MAX, st->saved_high);
	cg_fd = open_cgroup_by_id(st->saved_cgroup_id);
	if (cg_fd >= 0 && (!cg_write(cg_fd, "memory.high", high) || !cg_write(cg_fd, "memory.max", max)))
	{
		err = -errno;
		snprintf(why, whylen, "cannot restore the cgroup's %s: %s (kept; the next run tries again)",
				 record_text(st, text, sizeof(text)), strerror(-err));
	}
	if (cg_fd >= 0)
		close(cg_fd);
	if (err == 0)
	{
		fprintf(stderr, "pg_cache_ext_loader: the cgroup's limits lifted for the policy's teardown are back (%s)\n",
				record_text(st, text, sizeof(text)));
		st->teardown_map_id = 0;
		__atomic_store_n(&st->limits_saved, 0, __ATOMIC_SEQ_CST);
	}
	return err;
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

/* How long a run waits for the kernel's teardown: PCE_TEARDOWN_WAIT_SECONDS, default 60. */
static int
teardown_wait_seconds(void)
{
	const char *env = getenv("PCE_TEARDOWN_WAIT_SECONDS");
	int			s = env ? atoi(env) : PCE_TEARDOWN_WAIT_DEFAULT;

	return s >= 0 && s <= 3600 ? s : PCE_TEARDOWN_WAIT_DEFAULT;
}

/*
 * Step 5: has the kernel freed map map_id (and so the lists, see above)?
 * Waits up to seconds.  Map ids are allocated cyclically, so an id that
 * no longer resolves is not soon taken by another map.
 */
static bool
wait_map_freed(__u32 map_id, int seconds)
{
	for (long i = 0; map_id; i++)
	{
		int			mfd = bpf_map_get_fd_by_id(map_id);

		if (mfd < 0 && errno == ENOENT)
			break;
		if (mfd >= 0)
			close(mfd);
		if (i >= seconds * 100L)
			return false;
		usleep(10000);
	}
	wait_for_callbacks();		/* the teardown's last steps after the map's release */

	/*
	 * After releasing the map, the link's teardown takes the cgroup's
	 * cache_ext_sem for writing; every page-cache removal in the cgroup
	 * takes it for reading under the i_pages lock (get_cache_ext_ops()),
	 * and sleeps there, in atomic context, while a writer holds or waits:
	 * "scheduling while atomic" in the lab when the restored memory.max
	 * reclaimed at that moment.  So reclaim comes back only after a pause.
	 */
	usleep(200000);
	return true;
}

static int
unpin_policy(const struct pce_pins *pins, const char *name, char *why, size_t whylen)
{
	const char *fail = getenv("PCE_TEST_FAIL_UNPIN");	/* the lab's test of a failed unpin */

	if (fail && strcmp(fail, name) == 0)
	{
		snprintf(why, whylen, "cannot unpin \"%s/%s\": %s (PCE_TEST_FAIL_UNPIN)", pins->shown, name, strerror(EPERM));
		return -EPERM;
	}
	if (unlinkat(pins->dir_fd, name, 0) != 0 && errno != ENOENT)
	{
		int			err = -errno;

		snprintf(why, whylen, "cannot unpin \"%s/%s\": %s", pins->shown, name, strerror(-err));
		return err;
	}
	return 0;
}

/* Append to why that the limits stay lifted with their record, and how to finish. */
static void
say_limits_kept(const struct pce_policy_state *st, char *why, size_t whylen)
{
	char		text[2 * PCE_LIMIT_TEXT_MAX + 40];
	size_t		n = strlen(why);

	if (st && __atomic_load_n(&st->limits_saved, __ATOMIC_SEQ_CST) && n < whylen)
		snprintf(why + n, whylen - n, "; the cgroup's memory.max and memory.high stay lifted until the "
				 "kernel's teardown is known complete (to put back: %s): run the loader again to finish",
				 record_text(st, text, sizeof(text)));
}

/*
 * Steps 4 (the map's pin) to 6, once the link pin is gone: the teardown has
 * begun.  The detach does this, and so does the next run when the detach
 * did not get to its end.  map_id: the struct_ops map the teardown frees.
 */
static int
finish_teardown(const struct pce_pins *pins, struct pce_policy_state *st, __u32 map_id,
				char *why, size_t whylen)
{
	int			wait = teardown_wait_seconds();
	int			err = unpin_policy(pins, PCE_PIN_POLICY_MAP, why, whylen);

	if (err == 0 && !wait_map_freed(map_id, wait))
	{
		snprintf(why, whylen, "the kernel has not finished tearing the cache_ext policy down: its "
				 "struct_ops map (id %u) still exists after %d s", map_id, wait);
		err = -EBUSY;
	}
	if (err == 0 && st)
		err = restore_limits(st, why, whylen);
	if (err == 0 && st)
		err = unpin_policy(pins, PCE_PIN_POLICY_STATE, why, whylen);
	if (err)
		say_limits_kept(st, why, whylen);
	return err;
}

/*
 * A detach that did not get to its end (loader killed, an unpin failed,
 * the teardown slower than the wait) leaves its record in policy_state:
 * finish it.  Link still pinned: the teardown never began; the policy
 * serves again (ACTIVE) and the limits come back.  Link gone: finish the
 * teardown (finish_teardown()).  0, or a negative errno with why (the
 * record is then kept, and the caller must not attach or detach).  Every
 * run that changes pins calls this first.
 */
int
pce_policy_resume_interrupted(const struct pce_pins *pins, char *why, size_t whylen)
{
	struct pce_policy_state *st = map_policy_state(pins);
	int			err = 0;

	if (!st)
		return 0;
	if (pce_pin_exists(pins, PCE_PIN_POLICY_LINK))
	{
		if (st->phase != PCE_POLICY_ACTIVE)
			set_phase(st, PCE_POLICY_ACTIVE);
		err = restore_limits(st, why, whylen);
	}
	else if (__atomic_load_n(&st->limits_saved, __ATOMIC_SEQ_CST) || st->phase == PCE_POLICY_UNLINKING)
	{
		__u32		map_id = st->limits_saved && st->teardown_map_id ? st->teardown_map_id : pinned_map_id(pins);

		fprintf(stderr, "pg_cache_ext_loader: finishing an earlier cache_ext policy detach (struct_ops map id %u)\n",
				map_id);
		err = finish_teardown(pins, st, map_id, why, whylen);
	}
	unmap_policy_state(st);
	return err;
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

/* Steps 1-3 for the pinned link of cgroup cgid; the folios still listed in *left. */
static int
prepare_teardown(struct pce_policy_state *st, __u64 cgid, __u32 map_id, long long *left,
				 char *why, size_t whylen)
{
	int			cg_fd = open_cgroup_by_id(cgid);	/* the link's own cgroup, never a path */
	int			err;

	*left = drain_lists(cg_fd, st);
	err = lift_limits(cg_fd, cgid, map_id, st, why, whylen);
	if (cg_fd >= 0)
		close(cg_fd);
	return err;
}

int
pce_detach_policy(const struct pce_pins *pins, char *why, size_t whylen)
{
	__u32		link_id,
				map_id;
	__u64		cgid;
	struct pce_policy_state *st = NULL;
	long long	left = 0;
	int			err = pce_policy_resume_interrupted(pins, why, whylen);

	if (err)
		return err;				/* a kept record: no new teardown before it is restored */
	pinned_link_ids(pins, &link_id, &cgid);
	map_id = pinned_map_id(pins);
	st = link_id ? map_policy_state(pins) : NULL;
	if (link_id && !st && pce_pin_exists(pins, PCE_PIN_POLICY_STATE))
	{
		/*
		 * A policy_state this loader cannot use (another version's layout):
		 * unlinking without its phases is what frees the lists under the
		 * policy's running callbacks.  The loader that attached it can.
		 */
		snprintf(why, whylen, "the cache_ext policy was attached by a loader of another version "
				 "(its policy_state pin has another layout): detach it with that loader's --unload, "
				 "or reboot; nothing was changed");
		return -EPROTO;
	}
	if (st)
		err = prepare_teardown(st, cgid, map_id, &left, why, whylen);
	if (err == 0 && st)
		set_phase(st, PCE_POLICY_UNLINKING);
	if (err == 0 && (err = unpin_policy(pins, PCE_PIN_POLICY_LINK, why, whylen)) != 0)
		say_limits_kept(st, why, whylen);
	if (err == 0)
		err = finish_teardown(pins, st, map_id, why, whylen);
	unmap_policy_state(st);
	if (err)
		return err;
	if (link_id)
		fprintf(stderr, "pg_cache_ext_loader: cache_ext policy link %u detached: the cgroup's page cache is "
				"back under the kernel's LRU; %s\n", link_id,
				!st ? "the policy had no policy_state pin (an older loader's): detached without draining its lists" :
				left > 0 ? "some folios were still on the policy's lists when the kernel freed them" :
				"the policy's lists were emptied first");
	snprintf(why, whylen, link_id ? "policy link %u detached (%lld folios left on its lists)" :
			 "no policy link was pinned", link_id, left);
	return 0;
}
