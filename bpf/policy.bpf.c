/*
 * policy.bpf.c
 *		cache_ext mechanism: a scan-resistant page-cache policy for one
 *		cgroup, as a struct_ops map of type struct cache_ext_ops.
 *
 * The policy keeps two kernel lists of folios, created in init():
 *
 *	scan list	folios brought into the page cache by a task whose PID is in
 *				the scan_pids map (a PostgreSQL backend running a large scan,
 *				VACUUM, COPY TO, ...).  Evicted first, oldest first.
 *	main list	everything else, in LRU order: folio_added() appends at the
 *				tail, folio_accessed() moves a folio back to the tail, and
 *				eviction takes folios from the head.
 *
 * Callbacks, in the order a folio meets them:
 *
 *	folio_added		choose the list by whom the inserting task reads for
 *					(file_reader() in maps.bpf.h: a marked process, a thread of
 *					it, or an I/O worker performing its I/O, reading a file of
 *					the cluster's account) and remember the choice in
 *					folio_lists, keyed by folio address.
 *	folio_accessed	a scan folio touched by an unmarked task is promoted to the
 *					main list (knob promote_on_access); a main folio is refreshed.
 *					Folios the policy never saw (cached before it was attached) are
 *					adopted into the main list on their first access.
 *	evict_folios	fill the kernel's eviction batch: first from the scan list,
 *					unless the scan list is below scan_min_percent of the folios the
 *					policy tracks, then from the main list; a batch left short is
 *					counted as EVICT_UNFILLED (the kernel then falls back to its
 *					own LRU for the rest).
 *	folio_evicted	the folio leaves the page cache: count it against its list and
 *					forget it.  The kernel's valid_folios_del() unlinks its node
 *					right after this call, so the policy does not.
 *	admit_folio		not set.  The research kernel's bypass path (a read that
 *					misses served by direct I/O) leaks a page reference per page,
 *					serves a whole range from disk when only its first page
 *					missed (stale data beside cached dirty pages) and ignores
 *					read errors; do not use it until a kernel offers a safe
 *					drop-behind path.
 *
 * What the policy does not hold is left to the kernel's own LRU, which
 * evicts whatever evict_folios() did not fill, and is counted:
 *
 *	folios_untracked		folio_lists is full (its size: the loader's
 *							PCE_POLICY_MAX_FOLIOS, default 2^21 folios, 8 GiB).
 *	folios_list_refused		the kernel refused to list the folio: on a
 *							multi-node machine, every folio of a node other
 *							than 0 (see NUMA below).
 *
 * NUMA: the policy cannot keep lists per node on the research kernel
 * (branch artifact, mm/cache_ext_ds.c), so it keeps one pair, of node 0:
 *
 *	- bpf_cache_ext_ds_registry_new_list(memcg) has no node argument and
 *	  always registers the list in memcg->nodeinfo[0] (no other kfunc makes
 *	  a list);
 *	- list_add/add_tail/move look the list up in the registry of the
 *	  folio's own node (cache_ext_ds_registry_from_folio()), which on any
 *	  other node is empty: they return -1;
 *	- list_iterate(_extended) looks lists up in node 0's registry only, and
 *	  the teardown (cache_ext_ds_registry_del_all()) frees node 0's only;
 *	- reclaim of another node's lruvec accepts only folios of that node's
 *	  valid-folio set, so node-0 folios offered there are skipped and the
 *	  kernel's LRU reclaims that node.
 *
 * So folios of other nodes stay with the kernel's LRU, counted as
 * folios_list_refused; per-node lists need a kernel whose new_list takes a
 * node (and whose iteration and teardown follow it).
 *
 * Detach.  The research kernel frees the lists in the link's teardown while
 * the callbacks still run: it list_del()s every node still on a list
 * (leaving LIST_POISON in it) and only later re-initialises the nodes, and
 * a list kfunc that looked its list up just before the teardown goes on to
 * use the freed list.  A folio_accessed() moving a poisoned node crashed
 * the kernel in the lab.  So the loader walks the policy through
 * policy_state.phase before dropping the link (loader/policy.c):
 *
 *	DRAINING	nothing new is listed, nothing moves between lists; eviction takes
 *				from the lists, so the loader's reclaim empties them, and a
 *				folio accessed meanwhile (maybe in use right now, referenced
 *				or locked, which reclaim cannot take) is taken off its list.
 *				A node still listed when the kernel frees the lists is left
 *				poisoned until the kernel re-initialises it, and
 *				that folio's removal from the page cache in between (a
 *				truncate, an unlink) crashes the kernel: seen in the lab after
 *				48 detaches with busy readers (a 9p file's folios, truncated
 *				as its last user exited).
 *	UNLINKING	no list kfunc at all (no iteration either): the kernel's LRU
 *				evicts until the teardown is over.
 *
 * and waits for an RCU grace period after each change, so that no callback
 * that saw the earlier phase is still running.
 *
 * This file builds against the stock vmlinux.h of the build machine, which
 * knows nothing of cache_ext: the few cache_ext types and kfuncs are declared
 * below with preserve_access_index / __ksym, and libbpf resolves them against
 * the running kernel's BTF at load time.  The object therefore builds
 * everywhere and loads only where struct cache_ext_ops exists.
 *
 * Section and flags: the struct_ops map sits in ".struct_ops", the only
 * struct_ops section Debian's libbpf 1.1 (and bpftool 7.1's skeleton
 * generator) knows.  cache_ext needs a link-mode map (BPF_F_LINK) and a
 * sleepable init(); the loader (loader/policy.c) sets both with
 * bpf_map__set_map_flags() and bpf_program__set_flags() before loading,
 * then writes the map value and creates the BPF_CACHE_EXT_OPS link itself.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "maps.bpf.h"

char		LICENSE[] SEC("license") = "GPL";

/* ------------------------------------------------------------------ */
/* cache_ext types and kfuncs (include/linux/mm_types.h, cache_ext.h)  */
/* ------------------------------------------------------------------ */

#define PCE_EVICT_BATCH		32	/* size of folios_to_evict[] */

struct cache_ext_eviction_ctx
{
	unsigned long request_nr_folios_to_evict;
	unsigned long nr_folios_to_evict;
	struct folio *folios_to_evict[PCE_EVICT_BATCH];
	s64			scores[PCE_EVICT_BATCH];
} __attribute__((preserve_access_index));

struct cache_ext_admission_ctx
{
	u64			ino;
	u64			offset;
	u64			size;
} __attribute__((preserve_access_index));

struct cache_ext_list_node
{
	struct folio *folio;
	struct list_head node;
} __attribute__((preserve_access_index));

struct cache_ext_ops
{
	s32			(*init) (struct mem_cgroup *memcg);
	void		(*evict_folios) (struct cache_ext_eviction_ctx *ctx, struct mem_cgroup *memcg);
	void		(*folio_added) (struct folio *folio);
	void		(*folio_accessed) (struct folio *folio);
	void		(*folio_evicted) (struct folio *folio);
	bool		(*admit_folio) (struct cache_ext_admission_ctx *ctx);	/* unused */
};

/* Return values of a list-iteration callback. */
enum
{
	PCE_ITER_CONTINUE = 0,		/* CACHE_EXT_CONTINUE_ITER: skip this folio */
	PCE_ITER_STOP = 1,			/* CACHE_EXT_STOP_ITER */
	PCE_ITER_EVICT = 2,			/* CACHE_EXT_EVICT_NODE: add it to the batch */
};

extern u64 bpf_cache_ext_ds_registry_new_list(struct mem_cgroup *memcg) __ksym;
extern int	bpf_cache_ext_list_add_tail(u64 list, struct folio *folio) __ksym;
extern int	bpf_cache_ext_list_move(u64 list, struct folio *folio, bool tail) __ksym;
extern int	bpf_cache_ext_list_del(struct folio *folio) __ksym;
/*
 * bpf_cache_ext_list_iterate_extended()'s options (mm/cache_ext_ds.c): where
 * a node the callback skipped (CONTINUE) or selected (EVICT) goes.
 */
struct cache_ext_iterate_opts
{
	u64			continue_list;
	u64			continue_mode;
	u64			evict_list;
	u64			evict_mode;
	u64			nr_folios_continue;	/* out */
	u64			nr_folios_evict;	/* out */
};

enum
{
	PCE_ITERATE_SELF = 0,		/* CACHE_EXT_ITERATE_SELF: the list iterated */
	PCE_ITERATE_TAIL = 2,		/* CACHE_EXT_ITERATE_TAIL: move the node to the tail */
};

extern int	bpf_cache_ext_list_iterate_extended(struct mem_cgroup *memcg, u64 list,
												int (iter_fn) (int idx, struct cache_ext_list_node *node),
												struct cache_ext_iterate_opts *opts,
												struct cache_ext_eviction_ctx *ctx) __ksym;

/*
 * folio->flags is an unsigned long on the cache_ext kernel (6.6) and a
 * one-word struct on newer ones; this flavour reads the word by name, so the
 * offset is relocated against the running kernel.
 */
struct folio___pce
{
	unsigned long flags;
} __attribute__((preserve_access_index));

/* ------------------------------------------------------------------ */
/* Policy state                                                        */
/* ------------------------------------------------------------------ */

enum pce_list
{
	PCE_LIST_NONE = 0,
	PCE_LIST_SCAN = 1,
	PCE_LIST_MAIN = 2,
};

/* The two lists, created by init(); one policy object serves one cgroup. */
__u64		scan_list = 0;
__u64		main_list = 0;

/*
 * The state shared with the loader (struct pce_policy_state): the detach
 * phase the loader sets, and how many folios the policy holds on each list
 * (approximate under races).  Root-only pin; the server never opens it.
 */
struct
{
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, u32);
	__type(value, struct pce_policy_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
}			policy_state SEC(".maps");

/* Which list each folio the policy placed is on, keyed by folio address. */
struct
{
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 21);	/* 8 GiB of 4 KiB folios; the loader may change it */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, u64);
	__type(value, u32);
}			folio_lists SEC(".maps");

/*
 * How many more folios the current evict_folios() call may select.  The
 * iteration callback cannot see the eviction context, so evict_folios()
 * leaves the budget here.  evict_folios() is not sleepable and runs with
 * migration disabled, so one slot per CPU is private to the call.
 */
struct
{
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
}			evict_budget SEC(".maps");

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

static __always_inline bool
knob_promote_on_access(void)
{
	return KNOB(promote_on_access) != 0;
}

/* out of range (not a value the module writes): drain the scan list first */
static __always_inline u32
knob_scan_min_percent(void)
{
	u32			pct = KNOB(scan_min_percent);

	return pct > PCE_KNOB_MAX_scan_min_percent ? 0 : pct;
}

static __always_inline u64
folio_key(struct folio *folio)
{
	return (u64) folio;
}

static __always_inline u32
folio_list_of(struct folio *folio)
{
	u64			key = folio_key(folio);
	u32		   *which = bpf_map_lookup_elem(&folio_lists, &key);

	return which ? *which : PCE_LIST_NONE;
}

static __always_inline struct pce_policy_state *
shared_state(void)
{
	u32			zero = 0;

	return bpf_map_lookup_elem(&policy_state, &zero);
}

/* The detach phase the loader set (ACTIVE when it set none). */
static __always_inline u32
detach_phase(void)
{
	struct pce_policy_state *st = shared_state();

	return st ? st->phase : PCE_POLICY_ACTIVE;
}

static __always_inline void
list_count_add(u32 which, s64 delta)
{
	struct pce_policy_state *st = shared_state();

	if (!st)
		return;
	if (which == PCE_LIST_SCAN)
		__sync_fetch_and_add(&st->nr_scan_folios, delta);
	else if (which == PCE_LIST_MAIN)
		__sync_fetch_and_add(&st->nr_main_folios, delta);
}

/* Remember that folio is now on list which; false if the map is full. */
static __always_inline bool
remember_folio(struct folio *folio, u32 which)
{
	u64			key = folio_key(folio);

	return bpf_map_update_elem(&folio_lists, &key, &which, BPF_ANY) == 0;
}

static __always_inline bool
folio_flag(struct folio *folio, unsigned long bit)
{
	struct folio___pce *f = (void *) folio;

	return (f->flags >> bit) & 1;
}

/*
 * Can the kernel reclaim this folio right now?  Locked, dirty or in-flight
 * folios would take a slot of the batch and then fail to isolate.
 */
static __always_inline bool
folio_is_evictable(struct folio *folio)
{
	if (!folio_flag(folio, bpf_core_enum_value(enum pageflags, PG_uptodate)) ||
		!folio_flag(folio, bpf_core_enum_value(enum pageflags, PG_lru)))
		return false;
	if (folio_flag(folio, bpf_core_enum_value(enum pageflags, PG_locked)) ||
		folio_flag(folio, bpf_core_enum_value(enum pageflags, PG_dirty)) ||
		folio_flag(folio, bpf_core_enum_value(enum pageflags, PG_writeback)))
		return false;
	return true;
}

static __always_inline u64 *
budget_slot(void)
{
	u32			zero = 0;

	return bpf_map_lookup_elem(&evict_budget, &zero);
}

/* List-iteration callback: select evictable folios, oldest first, until the budget is spent. */
static int
select_for_eviction(int idx, struct cache_ext_list_node *node)
{
	u64		   *budget = budget_slot();

	if (!budget || *budget == 0)
		return PCE_ITER_STOP;
	if (!folio_is_evictable(node->folio))
		return PCE_ITER_CONTINUE;
	*budget -= 1;
	return PCE_ITER_EVICT;
}

/* Select up to ctx's remaining request from one list; returns how many were selected. */
static __always_inline u64
evict_from(u64 list, struct cache_ext_eviction_ctx *ctx, struct mem_cgroup *memcg)
{
	u64		   *budget = budget_slot();
	u64			want,
				before = ctx->nr_folios_to_evict;

	/*
	 * Skipped folios (dirty, locked, under writeback) and selected ones
	 * both go to the tail: the next call starts past them, so a head full
	 * of dirty folios cannot stall the list, and a folio the kernel failed
	 * to isolate is not offered first again.
	 */
	struct cache_ext_iterate_opts rotate = {
		.continue_list = PCE_ITERATE_SELF,
		.continue_mode = PCE_ITERATE_TAIL,
		.evict_list = PCE_ITERATE_SELF,
		.evict_mode = PCE_ITERATE_TAIL,
	};

	if (!budget || list == 0)
		return 0;
	want = ctx->request_nr_folios_to_evict;
	if (want > PCE_EVICT_BATCH)
		want = PCE_EVICT_BATCH;
	if (want <= before)
		return 0;
	*budget = want - before;
	bpf_cache_ext_list_iterate_extended(memcg, list, select_for_eviction, &rotate, ctx);
	*budget = 0;
	return ctx->nr_folios_to_evict - before;
}

/* Is the scan list big enough to be drained before the main list? */
static __always_inline bool
scan_list_goes_first(void)
{
	struct pce_policy_state *st = shared_state();
	s64			nscan,
				nmain;
	u32			pct = knob_scan_min_percent();

	if (!st)
		return false;
	nscan = st->nr_scan_folios;
	nmain = st->nr_main_folios;
	if (nscan <= 0)
		return false;
	if (nmain < 0)
		nmain = 0;
	return (u64) nscan * 100 >= (u64) pct * (u64) (nscan + nmain);
}

/* ------------------------------------------------------------------ */
/* Callbacks                                                           */
/* ------------------------------------------------------------------ */

/* Sleepable (BPF_F_SLEEPABLE set by the loader): list creation allocates. */
SEC("struct_ops/pce_init")
s32 BPF_PROG(pce_init, struct mem_cgroup *memcg)
{
	struct pce_policy_state *st;

	scan_list = bpf_cache_ext_ds_registry_new_list(memcg);
	if (scan_list == 0)
		return -1;
	main_list = bpf_cache_ext_ds_registry_new_list(memcg);
	if (main_list == 0)
		return -1;
	st = shared_state();
	if (!st)
		return -1;
	st->nr_scan_folios = 0;
	st->nr_main_folios = 0;
	return 0;
}

/*
 * Put a folio at the tail of list which and remember it there.  A folio
 * that cannot be remembered is taken off again: untracked folios are left
 * to the kernel's own LRU.  Returns the counter that says why it is not
 * listed, or PCE_STAT__COUNT when it is.
 */
static __always_inline enum pce_stat
list_folio(struct folio *folio, u32 which)
{
	if (bpf_cache_ext_list_add_tail(which == PCE_LIST_SCAN ? scan_list : main_list, folio) != 0)
		return PCE_STAT_FOLIOS_LIST_REFUSED;
	if (!remember_folio(folio, which))
	{
		bpf_cache_ext_list_del(folio);
		return PCE_STAT_FOLIOS_UNTRACKED;
	}
	list_count_add(which, 1);
	return PCE_STAT__COUNT;
}

SEC("struct_ops/pce_folio_added")
void BPF_PROG(pce_folio_added, struct folio *folio)
{
	enum pce_reader reader = file_reader(BPF_CORE_READ(folio, mapping));
	enum pce_stat not_listed;

	count_insertion(reader);
	if (detach_phase() != PCE_POLICY_ACTIVE)
		return;					/* detaching: left to the kernel's LRU */
	/* counted once, here; a later access retries the adoption uncounted */
	not_listed = list_folio(folio, reader != PCE_READER_NONE ? PCE_LIST_SCAN : PCE_LIST_MAIN);
	if (not_listed != PCE_STAT__COUNT)
		stat_inc(not_listed);
}

/*
 * Draining: take folio off its list, back to the kernel's LRU alone (the
 * lists still exist in this phase; see the top comment).
 */
static __always_inline void
unlist_folio(struct folio *folio)
{
	u64			key = folio_key(folio);
	u32			which = folio_list_of(folio);

	if (which == PCE_LIST_NONE || bpf_cache_ext_list_del(folio) != 0)
		return;
	/* counted off once: folio_evicted() may have forgotten it meanwhile */
	if (bpf_map_delete_elem(&folio_lists, &key) == 0)
		list_count_add(which, -1);
}

SEC("struct_ops/pce_folio_accessed")
void BPF_PROG(pce_folio_accessed, struct folio *folio)
{
	u32			phase = detach_phase();
	u32			which;

	if (phase == PCE_POLICY_DRAINING)
	{
		unlist_folio(folio);	/* maybe in use right now: reclaim cannot take it */
		return;
	}
	if (phase != PCE_POLICY_ACTIVE)
		return;					/* unlinking: no list call at all (see the top comment) */
	which = folio_list_of(folio);
	if (which == PCE_LIST_MAIN)
	{
		/* refresh: back to the most recently used end */
		bpf_cache_ext_list_move(main_list, folio, true);
		return;
	}
	if (which == PCE_LIST_SCAN)
	{
		if (!knob_promote_on_access() || current_task_is_scan())
			return;
		if (bpf_cache_ext_list_move(main_list, folio, true) != 0)
			return;
		remember_folio(folio, PCE_LIST_MAIN);
		list_count_add(PCE_LIST_SCAN, -1);
		list_count_add(PCE_LIST_MAIN, 1);
		stat_inc(PCE_STAT_FOLIOS_PROMOTED);
		return;
	}
	/* cached before the policy was attached: adopt it into the main list */
	list_folio(folio, PCE_LIST_MAIN);
}

SEC("struct_ops/pce_evict_folios")
void BPF_PROG(pce_evict_folios, struct cache_ext_eviction_ctx *ectx, struct mem_cgroup *memcg)
{
	u64			want = ectx->request_nr_folios_to_evict;

	if (want > PCE_EVICT_BATCH)
		want = PCE_EVICT_BATCH;
	if (detach_phase() == PCE_POLICY_UNLINKING)
		return;					/* the kernel is about to free the lists: its LRU decides */
	if (scan_list_goes_first())
		evict_from(scan_list, ectx, memcg);
	evict_from(main_list, ectx, memcg);
	if (ectx->nr_folios_to_evict < want)
		stat_inc(PCE_STAT_EVICT_REQUESTS_UNFILLED);
}

SEC("struct_ops/pce_folio_evicted")
void BPF_PROG(pce_folio_evicted, struct folio *folio)
{
	u64			key = folio_key(folio);
	u32			which = folio_list_of(folio);

	stat_inc(PCE_STAT_FOLIOS_REMOVED);
	if (which == PCE_LIST_NONE)
		return;
	/*
	 * No bpf_cache_ext_list_del(): the kernel unlinks the node right after
	 * this call.  Counted off once: a draining unlist_folio() may have
	 * forgotten it meanwhile.
	 */
	if (bpf_map_delete_elem(&folio_lists, &key) != 0)
		return;
	list_count_add(which, -1);
	stat_inc(which == PCE_LIST_SCAN ? PCE_STAT_FOLIOS_EVICTED_SCAN : PCE_STAT_FOLIOS_EVICTED_MAIN);
}

SEC(".struct_ops")
struct cache_ext_ops pce_policy_ops = {
	.init = (void *) pce_init,
	.evict_folios = (void *) pce_evict_folios,
	.folio_added = (void *) pce_folio_added,
	.folio_accessed = (void *) pce_folio_accessed,
	.folio_evicted = (void *) pce_folio_evicted,
	/* .admit_folio left NULL: see the header comment */
};
