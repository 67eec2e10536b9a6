# 090_cache_ext_lab.t
#	The cache_ext policy on the real cache_ext research kernel (QEMU lab):
#	a marked scan of a file larger than the cgroup's memory.max leaves an
#	unmarked process's hot file >= 95% resident with the policy attached,
#	and does not without it; the policy detached while readers are busy
#	(repeatedly, and with the loader killed midway: the cgroup's limits come
#	back); a dirty-heavy scan (the scan list's head dirty) still evicts scan
#	folios, not the hot set, without OOM; folios beyond the policy's capacity
#	are counted; the attach is refused under MGLRU; a teardown slower than
#	the loader's wait or a failed unpin keeps the limits lifted with their
#	record until a later run finishes it; a cgroup full of active cache
#	under a tight memory.max is not OOM-killed where the kernel's LRU is not.  Then the same with a
#	PostgreSQL 15 cluster whose scanning backend is marked, and with the
#	real loader and module (a process tree under pg_cache_ext_run inherits
#	the mark: the tracker's fork program) (PCE_LAB_PG=0 skips that part).
#	A run that fails or meets a kernel oops prints the VM console's tail.
#	Skips where the lab or qemu is absent.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use Test::More;

my $repo = File::Spec->rel2abs(File::Spec->catdir(dirname(__FILE__), '..'));
my $script = "$repo/test/lab/run-lab-test.sh";

my $lab = $ENV{PCE_KERNEL_LAB};
unless ($lab)
{
	($lab) = grep { -x "$_/run-in-vm" } ("$repo/../shared/kernel-lab", '/work/shared/kernel-lab');
}
plan skip_all => 'no cache_ext kernel lab (set PCE_KERNEL_LAB)' unless $lab && -x "$lab/run-in-vm";
plan skip_all => 'qemu-system-x86_64 not installed'
  unless grep { -x "$_/qemu-system-x86_64" } split /:/, $ENV{PATH};
plan skip_all => 'the lab needs root (QEMU 9p export of /, cgroups, bpffs inside)' unless $> == 0;

$ENV{PCE_KERNEL_LAB} = $lab;

# The lab's output holds the VM's serial console, kernel messages included.
# A run that failed, timed out or met a kernel oops shows what the kernel
# said: the first oops/panic/stall with what follows it, and the last lines.
my $KERNEL_TROUBLE = qr/Oops|BUG:|general protection|Kernel panic|detected stalls|WARNING: CPU/;

sub console_tail
{
	my ($out, $n) = @_;
	my @lines = split /\n/, $out;
	my $from = @lines > $n ? @lines - $n : 0;
	return join("\n", @lines[$from .. $#lines]);
}

sub console_report
{
	my ($name, $out, $rc) = @_;
	my @lines = split /\n/, $out;
	my ($first) = grep { $lines[$_] =~ $KERNEL_TROUBLE } 0 .. $#lines;
	my $msg = "$name: run-in-vm exit $rc" . ($rc == 124 ? ' (timed out: the VM stopped answering)' : '');
	$msg .= "\n--- the kernel's first complaint ---\n" . join("\n", @lines[$first .. ($first + 60 > $#lines ? $#lines : $first + 60)])
	  if defined $first;
	$msg .= "\n--- the VM's console, last 80 lines ---\n" . console_tail($out, 80);
	return $msg;
}

# one test: the console shows no oops, BUG, panic or RCU stall
sub console_clean
{
	my ($name, $out, $rc) = @_;
	my @trouble = grep { $_ =~ $KERNEL_TROUBLE } split /\n/, $out;
	is(scalar(@trouble), 0, "$name: no oops, BUG, panic or stall on the VM console")
	  or diag(console_report($name, $out, $rc));
}

# run_scenario(NAME): the scenario's output and exit code.  A kernel that
# died before the scenario said "BPF from here on" (on its output and in the
# kernel's log) died with nothing of the project loaded (seen once: an int3
# left by text patching in the research kernel while cp ran): that run is
# reported and the scenario runs once more.  So is a run that met the
# research kernel's own defect named in the README (a page-cache removal
# sleeping on cache_ext_sem, taken under the i_pages lock, while an attach
# or detach holds it: "scheduling while atomic" in get_cache_ext_ops); the
# loader narrows it (loader/policy.c, wait_map_freed) but cannot close it.
# And so is one that met its unlocked walk of the valid-folio set: reclaim
# through a policy looks every folio it is offered up in that set without
# the bucket's lock (__cache_ext_isolate_and_reclaim calls
# valid_folios_exists_unlocked, "TODO: Add read lock", mm/memcontrol.c of
# branch artifact) while a page-cache removal on another CPU frees an entry
# of the same bucket (valid_folios_del): a general protection fault in
# valid_folios_exists_unlocked, seen once in the detach cycles with busy
# readers.  No policy can avoid it: every eviction it makes goes through
# that walk.  A second such run fails.
sub known_kernel_defect
{
	my ($out) = @_;
	return 'a page-cache removal slept on cache_ext_sem (get_cache_ext_ops) in atomic context '
	  . 'while an attach or detach held it'
	  if $out =~ /scheduling while atomic/ && $out =~ /get_cache_ext_ops/;
	return 'reclaim walked the valid-folio set without its lock (valid_folios_exists_unlocked) '
	  . 'while a page-cache removal freed an entry'
	  if $out =~ /RIP: 0010:valid_folios_exists_unlocked\+/ && $out =~ /__cache_ext_isolate_and_reclaim/;
	return undef;
}

sub run_scenario
{
	my ($name) = @_;
	my ($out, $rc);
	for my $attempt (1, 2)
	{
		$out = `'$script' $name 2>&1`;
		$rc = $? >> 8;
		my $defect = known_kernel_defect($out);

		last if $rc == 0 || $rc == 77 || $out !~ $KERNEL_TROUBLE
		  || ($out =~ /BPF from here on/ && !defined $defect);
		diag("$name: "
			  . (defined $defect
				? "KNOWN RESEARCH-KERNEL DEFECT: $defect; README, cache_ext: running the scenario again"
				: 'the kernel died before any BPF was loaded; running the scenario again')
			  . "\n" . console_report($name, $out, $rc)) if $attempt == 1;
	}
	return ($out, $rc);
}

my ($out, $rc) = run_scenario('files');
my %r = $out =~ /^RESULT (\w+)=(\S+)/mg;
diag($_) for grep { /^LAB-TEST: / } split /\n/, $out;
if ($rc == 77)
{
	plan skip_all => 'lab unavailable: ' . ($out =~ /SKIP: (.*)/ ? $1 : 'unknown');
}

is($rc, 0, 'lab run completed') or diag(console_report('files', $out, $rc));
console_clean('files', $out, $rc);
is($r{attach_rc}, 0, 'policy attached to a cgroup v2 child on the cache_ext kernel');
cmp_ok($r{baseline_hot_before} // 0, '>=', 99, 'hot file fully cached before the scan (kernel LRU)');
cmp_ok($r{baseline_hot_after} // 100, '<', 95, "without the policy the scan evicts hot pages ($r{baseline_hot_after}% left)");
cmp_ok($r{policy_hot_before} // 0, '>=', 99, 'hot file fully cached before the scan (policy)');
cmp_ok($r{policy_hot_after} // 0, '>=', 95, "with the policy the hot file stays resident ($r{policy_hot_after}%)");
cmp_ok($r{stat_folios_added_scan} // 0, '>', 0, 'scan folios went to the scan list');
cmp_ok($r{stat_folios_evicted_scan} // 0, '>', 0, 'the policy evicted from the scan list');
cmp_ok($r{stat_folios_evicted_scan} // 0, '>', 10 * ($r{stat_folios_evicted_main} // 0),
	'scan list evicted first (scan ' . ($r{stat_folios_evicted_scan} // 0) . ', main ' . ($r{stat_folios_evicted_main} // 0) . ')');
cmp_ok($r{after_reread_folios_promoted} // 0, '>', 0, 'scan folios read by an unmarked process were promoted');
isnt($r{second_attach_rc} // 0, 0, 'a second policy on the same cgroup is refused');
SKIP:
{
	skip 'detach not exercised (PCE_LAB_DETACH=0)', 31 unless defined $r{detach_rc};
	is($r{detach_rc}, 0, 'policy detached while a reader is busy in the cgroup');
	is($r{detach_link_pin_left}, 0, 'policy_link pin removed');
	is($r{detach_concurrent_reader_rc}, 0, 'concurrent reader survived the detach');
	is($r{after_detach_read_rc}, 0, 'reads in the cgroup work after the detach');
	is($r{reattach_rc}, 0, 'the policy can be attached again');
	is($r{detach_memory_max} // '', $r{max_bytes} // '', 'the detach gave the cgroup its memory.max back');
	is($r{killed_detach_rc} // '', 137, 'a loader killed (SIGKILL) during a detach ...');
	is($r{killed_detach_memory_max} // '', 'max', '... left memory.max lifted for the teardown');
	is($r{resumed_memory_max} // '', $r{max_bytes} // '', 'the next loader run restored memory.max from the record');
	is($r{final_detach_rc} // '', 0, 'and the interrupted detach could be done again');
	is($r{detach_cycles} // 0, 8, '8 cycles of attach, two busy readers, detach');
	is($r{cycles_memory_max} // '', $r{max_bytes} // '', 'memory.max back after them');
	isnt($r{slow_detach_rc} // 0, 0, 'a teardown slower than the wait: the detach fails ...');
	is($r{slow_detach_memory_max} // '', 'max', '... and leaves memory.max lifted (the map is not freed yet)');
	isnt($r{slow_resume_early_rc} // 0, 0, 'a run while the map still exists fails too ...');
	is($r{slow_resume_early_memory_max} // '', 'max', '... and does not put the limits back early');
	isnt($r{slow_attach_other_rc} // 0, 0, 'an attach (to another cgroup) while the record is kept is refused');
	is($r{slow_attach_other_link} // 1, 0, '... and leaves no link');
	is($r{slow_resume_rc} // '', 0, 'once the map is freed the next run finishes the detach');
	is($r{slow_resumed_memory_max} // '', $r{max_bytes} // '', '... and puts the recorded memory.max back (record not overwritten)');
	is($r{slow_other_memory_max} // '', '52428800', 'the other cgroup\'s memory.max untouched');
	isnt($r{unpin_fail_rc} // 0, 0, 'the struct_ops map\'s unpin failing: the detach fails ...');
	is($r{unpin_fail_memory_max} // '', 'max', '... with memory.max lifted (the teardown cannot end)');
	is($r{unpin_fail_map_pin} // '', 1, '... and the map pin left');
	is($r{unpin_resume_rc} // '', 0, 'the next run finishes that detach');
	is($r{unpin_resume_map_pin} // '', 0, '... removing the map pin');
	is($r{unpin_resume_state_pin} // '', 0, '... and the policy_state pin (no phase left at UNLINKING)');
	is($r{unpin_resumed_memory_max} // '', $r{max_bytes} // '', '... and putting memory.max back');
	is($r{unpin_after_cycle_rc} // '', 0, 'then the policy attaches and detaches again');
	is($r{kernel_oops}, 0, 'no oops/BUG/WARNING in the kernel log');
	ok(1, 'detach sequence completed');
}
is($r{dirty_scan_rc} // '', 0, 'dirty-heavy scan: the scan ran to its end (no OOM kill)');
is($r{dirty_oom_kills} // '', 0, 'dirty-heavy scan: memory.events oom_kill 0');
cmp_ok($r{dirty_hot_before} // 0, '>=', 99, 'dirty-heavy scan: hot file cached before');
cmp_ok($r{dirty_hot_after} // 0, '>=', 95,
	"dirty-heavy scan (the scan list's head dirty): the hot file stays ($r{dirty_hot_after}%)");
cmp_ok($r{dirty_evicted_scan} // 0, '>', 10 * ($r{dirty_evicted_main} // 0),
	'dirty-heavy scan: scan folios evicted, not main (scan ' . ($r{dirty_evicted_scan} // '?')
	  . ', main ' . ($r{dirty_evicted_main} // '?') . ')');
is($r{untracked_read_rc} // '', 0, 'a policy full (1024 folios) still lets the cgroup read');
cmp_ok($r{untracked_added} // 0, '>', 0, "folios it could not hold counted as folios_untracked ($r{untracked_added})");
is($r{oom_lru_anon_rc} // '', 0, 'active cache (inactive list empty), tight memory.max, kernel LRU: a 16 MiB allocation succeeds');
is($r{oom_lru_scan_rc} // '', 0, 'active cache, tight memory.max, kernel LRU: the scan ran to its end');
is($r{oom_lru_kills} // '', 0, 'active cache, tight memory.max, kernel LRU: no OOM kill (the reference)');
is($r{oom_policy_attach_rc} // '', 0, 'active cache, tight memory.max: the policy attached to the second cgroup');
cmp_ok($r{oom_policy_scan_policy_evicted} // 0, '>', 0,
	"active cache, tight memory.max: the policy did the evicting during the scan ($r{oom_policy_scan_policy_evicted} folios)");
is($r{oom_policy_anon_rc} // '', 0, 'active cache (inactive list empty), tight memory.max, policy: a 16 MiB allocation succeeds');
is($r{oom_policy_anon_kills} // '', 0, 'active cache, tight memory.max, policy: no OOM kill for the allocation');
is($r{oom_policy_scan_rc} // '', 0, 'active cache, tight memory.max, policy: the marked scan ran to its end');
is($r{oom_policy_kills} // '', $r{oom_lru_kills} // 0,
	'active cache, tight memory.max, policy: no more OOM kills than the kernel LRU');
isnt($r{mglru_attach_rc} // 0, 0, 'with MGLRU on, the attach is refused');
is($r{mglru_reason} // 0, 1, '... saying MGLRU is why');
is($r{mglru_link} // 1, 0, '... and no policy link is left');

# The same with a real PostgreSQL 15 cluster (tables prepared on the host):
# the scanning backend's PID is marked, as the module's executor hook does.
SKIP:
{
	skip 'PCE_LAB_PG=0', 7 if defined $ENV{PCE_LAB_PG} && !$ENV{PCE_LAB_PG};
	my ($pgout, $pgrc) = run_scenario('pg');
	skip 'PostgreSQL scenario unavailable: ' . ($pgout =~ /SKIP: (.*)/ ? $1 : ''), 7 if $pgrc == 77;
	my %p = $pgout =~ /^RESULT (\w+)=(\S+)/mg;
	diag($_) for grep { /^LAB-TEST: / } split /\n/, $pgout;
	is($pgrc, 0, 'PostgreSQL lab run completed') or diag(console_report('pg', $pgout, $pgrc));
	console_clean('pg', $pgout, $pgrc);
	cmp_ok($p{pg_baseline_hot_before} // 0, '>=', 99, 'PostgreSQL: hot table cached before the scan (kernel LRU)');
	cmp_ok($p{pg_baseline_hot_after} // 100, '<', 95,
		"PostgreSQL without the policy: the scan evicts hot pages ($p{pg_baseline_hot_after}% left)");
	cmp_ok($p{pg_policy_hot_before} // 0, '>=', 99, 'PostgreSQL: hot table cached before the scan (policy)');
	cmp_ok($p{pg_policy_hot_after} // 0, '>=', 95,
		"PostgreSQL with the policy: the hot table stays resident ($p{pg_policy_hot_after}%)");
	cmp_ok($p{pg_stat_folios_evicted_scan} // 0, '>', $p{pg_stat_folios_evicted_main} // 0,
		'PostgreSQL: the marked backend\'s folios were evicted first');
}
# The whole product, nothing hand-made: the real loader attaches the policy
# to the cluster's cgroup, the module is preloaded, and its executor hook
# marks the scanning backend; then the same with pg_cache_ext.mode = off.
SKIP:
{
	skip 'PCE_LAB_PG=0', 18 if defined $ENV{PCE_LAB_PG} && !$ENV{PCE_LAB_PG};
	my ($lout, $lrc) = run_scenario('loader');
	skip 'loader scenario unavailable: ' . ($lout =~ /SKIP: (.*)/ ? $1 : ''), 18 if $lrc == 77;
	my %l = $lout =~ /^RESULT (\w+)=(\S+)/mg;
	diag($_) for grep { /^LAB-TEST: / } split /\n/, $lout;
	is($lrc, 0, 'loader lab run completed') or diag(console_report('loader', $lout, $lrc));
	console_clean('loader', $lout, $lrc);
	is($l{loader_swapped_cgroup_attached} // -1, 0,
		'a --cgroup through a symlink swapped during 10 loader runs: never attached');
	is($l{loader_other_memory_max} // '', '80740352', 'and the other cgroup\'s memory.max untouched');
	is($l{loader_autoconf_cgroup_attached} // -1, 0, 'a cgroup from postgresql.auto.conf: not attached');
	is($l{loader_rc}, 0, 'pg_cache_ext_loader attached the policy and pinned its link');
	is($l{loader_state} // '', 'active', 'cache_ext_status(): active');
	is($l{loader_mechanism} // '', 'cache_ext', 'cache_ext_status(): mechanism cache_ext');
	cmp_ok($l{loader_marks_seqscan} // 0, '>=', 1, 'the module marked the scanning backend by itself');
	cmp_ok($l{loader_hot_after} // 0, '>=', 95,
		"with the extension the hot table stays cached ($l{loader_hot_after}%)");
	cmp_ok($l{loader_folios_evicted_scan} // 0, '>', $l{loader_folios_evicted_main} // 0,
		"scan folios evicted first (scan $l{loader_folios_evicted_scan}, main $l{loader_folios_evicted_main})");
	is($l{loader_map_entries_after} // '', '0', 'no mark left after the scan');
	cmp_ok($l{loader_own_file_scan} // 0, '>=', 8,
		"a marked read of a file of the cluster's account is the scan's ($l{loader_own_file_scan} folios)");
	cmp_ok($l{loader_root_file_scan} // 1e9, '<', ($l{loader_own_file_scan} // 0) / 10,
		"the same read of root's file is not ($l{loader_root_file_scan} folios)");
	cmp_ok($l{loader_run_tree_scan} // 0, '>=', 8,
		"cat forked by sh forked by pg_cache_ext_run inherits the mark: its folios are the scan's "
		  . "($l{loader_run_tree_scan} folios)");
	cmp_ok($l{loader_bare_tree_scan} // 1e9, '<', ($l{loader_run_tree_scan} // 0) / 10,
		"the same sh and cat without the wrapper: not ($l{loader_bare_tree_scan} folios)");
	cmp_ok($l{loader_off_hot_after} // 100, '<', 95,
		"with pg_cache_ext.mode = off the same scan pushes the hot table out ($l{loader_off_hot_after}% left)");
	is($l{loader_kernel_oops} // 1, 0, 'no oops in the kernel log');
}
done_testing();
