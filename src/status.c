/*-------------------------------------------------------------------------
 *
 * status.c
 *		What is in force and what the kernel can do: the settings snapshot,
 *		the knobs made from it, the mechanism decision the worker acts on and
 *		cache_ext_status() reports, and the kernel probe (BTF).
 *
 * bpf_maps.c only carries values to and from the pins; the decisions about
 * those values are made here, from a PceSettings snapshot taken once per
 * configuration reload and passed explicitly, so that a setting reaches
 * the evictor and the BPF knobs by one visible route.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "storage/lwlock.h"

#include "pg_cache_ext_int.h"

/* The GUCs as they are now; the worker takes one per reload. */
void
pce_settings_snapshot(PceSettings *settings)
{
	memset(settings, 0, sizeof(*settings));
	settings->mode = pce_mode;
	settings->promote_on_access = pce_promote_on_access;
	settings->scan_min_percent = pce_scan_min_percent;
	settings->scan_budget_mb = pce_scan_budget_mb;
	settings->scan_max_age_s = pce_scan_max_age_s;
	settings->drop_unread_wal = pce_drop_unread_wal_enabled;
}

/*
 * The inode number of the server's PID namespace, in which MyProcPid and
 * the PIDs of the scan-PID map are counted: in a container they are not the
 * PIDs the kernel's BPF helpers return, and the BPF side translates (see
 * current_tid_as_server_sees_it() in bpf/maps.bpf.h).  0 if /proc does not
 * say, which keys marks by the initial namespace's PIDs as before.  What the
 * server writes here gives it no power it lacked: a member of the pins'
 * group may already mark any PID of the host.
 */
static uint32
own_pid_ns_ino(void)
{
	struct stat st;

	if (stat("/proc/self/ns/pid", &st) != 0)
		return 0;
	return (uint32) st.st_ino;
}

/* The BPF knobs that carry these settings (bpf/pg_cache_ext.h). */
void
pce_knobs_from_settings(const PceSettings *settings, struct pce_knobs *knobs)
{
	memset(knobs, 0, sizeof(*knobs));
	knobs->abi_version = PCE_ABI_VERSION;
	knobs->tracking = settings->mode != PCE_MODE_OFF;
	knobs->promote_on_access = settings->promote_on_access;
	knobs->scan_min_percent = settings->scan_min_percent;
	knobs->pid_ns_ino = own_pid_ns_ino();
	/* fixed at server start: the BPF side skips the I/O worker rule without it */
	knobs->io_workers = pce_aio_owner_marks();
}

const char *
pce_mechanism_name(uint32 mech)
{
	switch (mech)
	{
		case PCE_MECH_STOCK:
			return "stock";
		case PCE_MECH_CACHE_EXT:
			return "cache_ext";
		default:
			return "none";
	}
}

/* The table's name of a mode (bpf/pce_modes.h). */
const char *
pce_mode_name(int mode)
{
	switch (mode)
	{
#define PCE_MODE_CASE(sym, name) case sym: return name;
			PCE_MODE_TABLE(PCE_MODE_CASE)
#undef PCE_MODE_CASE
	}
	return "auto";
}

/*
 * Which mechanism is in force, given what the loader did, whether its link
 * is still pinned (a loader killed halfway leaves maps without one) and the
 * mode in settings?  Returns the mechanism, or PCE_MECH_NONE with *why saying why.  The
 * worker acts on this and cache_ext_status() reports it, so both agree.
 */
enum pce_mechanism
pce_current_mechanism(const PceSettings *settings, const char **why,
					  struct pce_loader_info *info_out)
{
	static struct pce_loader_info info;
	static char reason[256];

	*why = NULL;
	memset(&info, 0, sizeof(info));
	if (pce_maps_open(false) && pce_map_read_loader_info(&info) && info_out)
		*info_out = info;
	else if (info_out)
		memset(info_out, 0, sizeof(*info_out));

	if (settings->mode == PCE_MODE_OFF)
	{
		*why = "pg_cache_ext.mode is off";
		return PCE_MECH_NONE;
	}
	if (!pce_maps_open(false))
	{
		*why = pce_maps_error();
		return PCE_MECH_NONE;
	}
	if (info.abi_version != PCE_ABI_VERSION || info.mechanism == PCE_MECH_NONE)
	{
		*why = "the loader left no record of a mechanism (rerun pg_cache_ext_loader)";
		return PCE_MECH_NONE;
	}
	if (!pce_pin_present(info.mechanism == PCE_MECH_CACHE_EXT ? PCE_PIN_POLICY_LINK : PCE_PIN_TRACKER_LINK))
	{
		snprintf(reason, sizeof(reason), "the loader recorded %s but its link is not pinned "
				 "(loader interrupted?): rerun pg_cache_ext_loader",
				 pce_mechanism_name(info.mechanism));
		*why = reason;
		return PCE_MECH_NONE;
	}
	if ((settings->mode == PCE_MODE_STOCK && info.mechanism != PCE_MECH_STOCK) ||
		(settings->mode == PCE_MODE_CACHE_EXT && info.mechanism != PCE_MECH_CACHE_EXT))
	{
		snprintf(reason, sizeof(reason), "pg_cache_ext.mode = %s but the loader put %s in place",
				 pce_mode_name(settings->mode), pce_mechanism_name(info.mechanism));
		*why = reason;
		return PCE_MECH_NONE;
	}
	*why = info.reason;
	return (enum pce_mechanism) info.mechanism;
}

/*
 * Does the running kernel's BTF describe cache_ext_ops?  Parsing the BTF
 * takes tens of milliseconds, so the worker probes at start, and the
 * result stays in shared memory for every backend (the first caller
 * probes if the worker has not yet).  Not the loader's probe, which also
 * needs the struct_ops support it attaches with.
 */
bool
pce_kernel_btf_has_cache_ext(void)
{
	PceKernelProbe has_cache_ext;

	LWLockAcquire(pce_shared->lock, LW_SHARED);
	has_cache_ext = pce_shared->btf_has_cache_ext;
	LWLockRelease(pce_shared->lock);
	if (has_cache_ext == PCE_PROBE_UNKNOWN)
	{
		struct btf *vmlinux = btf__load_vmlinux_btf();

		has_cache_ext = vmlinux &&
			btf__find_by_name_kind(vmlinux, "cache_ext_ops", BTF_KIND_STRUCT) >= 0 ?
			PCE_PROBE_YES : PCE_PROBE_NO;
		btf__free(vmlinux);
		LWLockAcquire(pce_shared->lock, LW_EXCLUSIVE);
		pce_shared->btf_has_cache_ext = has_cache_ext;
		LWLockRelease(pce_shared->lock);
	}
	return has_cache_ext == PCE_PROBE_YES;
}

/* The table's program of a read hook (bpf/pg_cache_ext.h), NULL for none. */
const char *
pce_read_hook_program_name(uint32 hook)
{
	switch (hook)
	{
#define PCE_READ_HOOK_CASE(sym, name, program, btf_name, attach_type) \
		case sym: return program[0] ? program : NULL;
			PCE_READ_HOOK_TABLE(PCE_READ_HOOK_CASE)
#undef PCE_READ_HOOK_CASE
	}
	return NULL;
}
