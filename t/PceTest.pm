# PceTest.pm
#	Helpers shared by pg_cache_ext's TAP tests: clusters with the module
#	preloaded, the privileged steps (through test/root-helper), and reading
#	status, counters and the kernel map.
package PceTest;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use POSIX ();

our @EXPORT = qw(root new_node stock_node load_bpf unload_bpf status stat_value kernel_marks
  wait_until capeff pin_dir_name io_methods use_io_method caches_dropped
  relation_cached_fraction relation_cached_mb relation_cached_map worker_settled tracker_counts
  pause_damon resume_damon read_ahead_mb device_of disk_read_bytes io_worker_pids
  skip_without_read_positions has_read_positions no_read_positions_why
  kernel_has_read_tracepoint
  table_in_tablespace unmarked_cold_read_stays marked_cold_scan_within_budget);

# Privileged steps: directly when root, else through sudo and the helper
# copy that scripts/test.sh installed.
sub root
{
	my @cmd = @_;
	my $helper = $ENV{PCE_ROOT_HELPER} || '/usr/local/libexec/pg_cache_ext-test-root-helper';
	my @full = $> == 0 ? ($helper, @cmd) : ('sudo', '-n', $helper, @cmd);
	my ($out, $err);
	my $ok = IPC::Run::run(\@full, '>', \$out, '2>', \$err);
	return wantarray ? ($ok, $out, $err) : $ok;
}

# A cluster with pg_cache_ext preloaded; extra settings in %conf (init => {...}:
# options of PostgreSQL::Test::Cluster::init).
sub new_node
{
	my ($name, %conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	my $init = delete $conf{init} // {};    # e.g. { allows_streaming => 1 }
	$node->init(%$init);
	my $preload = delete $conf{preload} // 1;
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'pg_cache_ext'")
	  if $preload;
	$node->append_conf('postgresql.conf', "shared_buffers = 16MB\n");
	# 18+: io_method is the server's default (worker) unless a test asks
	# for another (use_io_method)
	$node->append_conf('postgresql.conf', "$_ = $conf{$_}") for sort keys %conf;
	return $node;
}

# A started cluster with the loader run and the extension created, for the
# tests of the stock-kernel mechanism: they are skipped, with the reason,
# where another mechanism is in force.  Returns the node and its status.
sub stock_node
{
	my ($name, %conf) = @_;
	my $node = new_node($name, %conf);
	load_bpf($node) or BAIL_OUT('loader failed');
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_cache_ext');
	my $s = status($node);
	plan skip_all => "stock mechanism not active here: $s->{reason}" if $s->{mechanism} ne 'stock';
	return ($node, $s);
}

my %loaded;    # data directories the loader ran for, unloaded at exit

sub load_bpf
{
	my ($node, @args) = @_;
	$loaded{ $node->data_dir } = 1;
	return root('loader', '-D', $node->data_dir, @args);
}

# Leave no pins behind, even when a test dies halfway.
END
{
	local $?;
	root('loader', '--unload', '-D', $_) for grep { -d $_ } sort keys %loaded;
}

sub unload_bpf
{
	my ($node) = @_;
	return root('loader', '--unload', '-D', $node->data_dir);
}

# The name of a cluster's pin directory below the pin root, by the rule of
# bpf/pce_paths.h: "<system identifier>-<device>-<inode of the data directory>".
sub pin_dir_name
{
	my ($node) = @_;
	my $bindir = `pg_config --bindir`;
	chomp $bindir;
	my $data = $node->data_dir;
	my ($sysid) = `$bindir/pg_controldata -D '$data'` =~ /Database system identifier:\s+(\d+)/;
	my ($dev, $ino) = stat($data);
	return "$sysid-$dev-$ino";
}

# cache_ext_status() as a hash
sub status
{
	my ($node) = @_;
	my %s;
	for (split /\n/, $node->safe_psql('postgres',
		"SELECT name || '=' || coalesce(value, '') FROM cache_ext_status()"))
	{
		my ($k, $v) = split /=/, $_, 2;
		$s{$k} = $v;
	}
	return \%s;
}

sub stat_value
{
	my ($node, $name) = @_;
	return $node->safe_psql('postgres',
		"SELECT value FROM cache_ext_stats() WHERE name = '$name'");
}

# PIDs in the kernel's scan-PID map, read back through the pins as the
# unprivileged user (pg_cache_ext_loader --show needs no root).
sub kernel_marks
{
	my ($node) = @_;
	my ($out, $err);
	my $loader = `pg_config --bindir`;
	chomp $loader;
	IPC::Run::run([ "$loader/pg_cache_ext_loader", '--show', '-D', $node->data_dir ],
		'>', \$out, '2>', \$err)
	  or return undef;
	my %pids;
	$pids{$1} = $2 while $out =~ /^pid (\d+) reason (\d+)/mg;
	return \%pids;
}

# Poll a condition every 50 ms for up to $timeout seconds.
sub wait_until
{
	my ($cond, $timeout) = @_;
	my $deadline = time + ($timeout // 10);
	while (time < $deadline)
	{
		return 1 if $cond->();
		usleep(50_000);
	}
	return $cond->() ? 1 : 0;
}

# The io_method values a test of reads runs under: on 18 and later every
# method PostgreSQL has, the default (worker) last so that what follows a
# loop over them runs under it (PCE_IO_METHODS="worker" narrows the list);
# before 18 one pass without the setting (undef).
sub io_methods
{
	my ($node) = @_;
	return (undef) if $node->pg_version < 18;
	return split ' ', ($ENV{PCE_IO_METHODS} // 'sync io_uring worker');
}

# Restart $node with io_method = $method (nothing before 18, or for undef).
sub use_io_method
{
	my ($node, $method) = @_;
	return if !defined $method || $node->pg_version < 18;
	$node->safe_psql('postgres', "ALTER SYSTEM SET io_method = '$method'");
	$node->restart;
	is($node->safe_psql('postgres', 'SHOW io_method'), $method, "the server runs with io_method = $method");
}

# How many times the machine's page cache was dropped (drop_caches, counted
# in /proc/vmstat).  A round that measures cached bytes is redone when
# another run (a lane of another checkout) dropped the caches meanwhile.
sub caches_dropped
{
	open my $fh, '<', '/proc/vmstat' or return 0;
	while (<$fh>)
	{
		return $1 if /^drop_pagecache (\d+)/;
	}
	return 0;
}

# DAMON, where it runs a pageout scheme (this machine's kernel does), pages
# out page cache that looks idle in coarse regions: a file read once here
# lost 3% of its pages within 5 s and 22% within 60 s.  A test that asks
# what stays cached would count that against the extension (CI saw a hot
# table read once at 91-96%), so such a test pauses DAMON until it ends
# (test/root-helper lists the tests holding it paused by PID, forgets those
# that died, and switches it on again when none is left).
my $damon_paused = 0;

sub pause_damon
{
	$damon_paused = 1 if !$damon_paused && root('damon-pause', $$);
	return $damon_paused;
}

sub resume_damon
{
	root('damon-resume', $$) if $damon_paused;
	$damon_paused = 0;
}

END { local $?; resume_damon(); }

# Effective capabilities of a process, as the hex string in /proc.
sub capeff
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/status" or return undef;
	while (<$fh>)
	{
		return $1 if /^CapEff:\s+([0-9a-f]+)/;
	}
	return undef;
}

# How much of relation $rel's main fork is in the page cache, as a
# fraction (3 decimals) or in MB (1 decimal): cache_ext_relation_cache().
sub relation_cached_fraction
{
	my ($node, $rel) = @_;
	return $node->safe_psql('postgres',
		"SELECT round(cached_fraction::numeric, 3) FROM cache_ext_relation_cache('$rel')");
}

sub relation_cached_mb
{
	my ($node, $rel) = @_;
	return $node->safe_psql('postgres',
		"SELECT round(cached_bytes / 1048576.0, 1) FROM cache_ext_relation_cache('$rel')");
}

# Which parts of $rel's first segment are cached, one character per
# $bin_mb: '#' all of it, '.' none, a digit the tenths cached.  For the
# notes a test prints when what it measured does not add up (mincore(2)
# on a mapping of the file, through syscall: x86_64's numbers).
sub relation_cached_map
{
	my ($node, $rel, $bin_mb) = @_;
	my ($sys_mmap, $sys_munmap, $sys_mincore, $prot_read, $map_shared) = (9, 11, 27, 1, 1);
	my $page = 4096;
	my $machine = (POSIX::uname())[4];
	my $path = $node->data_dir . '/'
	  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('$rel')");

	return "(no map on $machine)" unless $machine eq 'x86_64';
	open(my $fh, '<', $path) or return "(no map: $path: $!)";
	my $size = -s $fh;
	return '(empty)' unless $size;
	my $addr = syscall($sys_mmap, 0, $size, $prot_read, $map_shared, fileno($fh), 0);
	return "(no map: mmap: $!)" if $addr == -1;
	my $vec = "\0" x int(($size + $page - 1) / $page);
	my $ok = syscall($sys_mincore, $addr, $size, $vec) == 0;
	syscall($sys_munmap, $addr, $size);
	return "(no map: mincore: $!)" unless $ok;
	my $per = $bin_mb * 1024 * 1024 / $page;
	my $map = '';
	for (my $i = 0; $i < length($vec); $i += $per)
	{
		my $bin = substr($vec, $i, $per);
		my $cached = () = $bin =~ /[\x01-\xff]/g;
		my $share = $cached / length($bin);
		$map .= $share == 0 ? '.' : $share >= 1 ? '#' : int($share * 10);
	}
	return $map;
}

# Where marked readers are comes from the tracker's read hook
# (sibling.c): the read tracepoint (6.10+) or fentry on filemap_read, as
# the loader could attach them.  The tests of what is kept for a reader
# are skipped, with the reason, where it attached neither; call this
# before the first test.
sub skip_without_read_positions
{
	my ($node) = @_;
	plan skip_all => no_read_positions_why($node) unless has_read_positions($node);
	return;
}

# Has the loader of $node's cluster attached a read hook?  (In a SKIP
# block: skip no_read_positions_why($node), N unless has_read_positions($node).)
# A kernel with the read tracepoint must have it: the hook is then not
# missing but broken, and the test dies rather than skips.
sub has_read_positions
{
	my ($node) = @_;
	my $hook = status($node)->{read_hook};
	die "the kernel has mm_filemap_get_pages but cache_ext_status() shows no read hook"
	  if $hook eq '' && kernel_has_read_tracepoint();
	return $hook ne '';
}

sub kernel_has_read_tracepoint
{
	open my $btf, '<:raw', '/sys/kernel/btf/vmlinux' or return 0;
	my $has = do { local $/; <$btf> =~ /btf_trace_mm_filemap_get_pages\0/ };
	close $btf;
	return $has;
}

sub no_read_positions_why
{
	my ($node) = @_;
	my $s = status($node);
	return "the loader attached no read hook on kernel $s->{kernel} (its output says which it "
	  . "lacks or refused): no scan positions";
}

# The read-ahead (MB) of the disk $path is on: its read_ahead_kb in sysfs
# (a partition's is its disk's, a btrfs file system's its own); the
# kernel's default, 128 kB, where sysfs has none (an overlay).  A
# sequential reader has up to two such windows ahead of it, which the
# evictor counts first in the budget.
sub read_ahead_mb
{
	my ($path) = @_;
	my ($major, $minor) = device_of($path);
	my $btrfs = btrfs_fsid($path);
	for my $file ("/sys/dev/block/$major:$minor/queue/read_ahead_kb",
		"/sys/dev/block/$major:$minor/../queue/read_ahead_kb",
		$btrfs ? ("/sys/fs/btrfs/$btrfs/bdi/read_ahead_kb") : ())
	{
		open my $f, '<', $file or next;
		my $kb = <$f>;
		close $f;
		return $kb / 1024 if defined $kb && $kb =~ /^\d+$/;
	}
	return 128 / 1024;
}

# The device $path is on, as (major, minor): the kernel's
# new_decode_dev() of stat()'s st_dev.  (0, 0) if $path is missing.
sub device_of
{
	my ($path) = @_;
	my $dev = (stat $path)[0] // 0;
	return ((($dev >> 8) & 0xfff) | (($dev >> 32) & ~0xfff),
		($dev & 0xff) | (($dev >> 12) & 0xffffff00));
}

# The UUID of the btrfs file system $path is on (BTRFS_IOC_FS_INFO: its
# fsid, 16 bytes at offset 16 of 1 kB), or undef if it is not on btrfs.
sub btrfs_fsid
{
	my ($path) = @_;
	my $fs_info = 0x8400941f;    # _IOR(0x94, 31, 1024)
	my $args = "\0" x 1024;
	open(my $fh, '<', $path) or return undef;
	my $ok = ioctl($fh, $fs_info, $args);
	close $fh;
	return undef unless $ok;
	my $hex = unpack('H32', substr($args, 16, 16));
	return join '-', unpack('A8 A4 A4 A4 A12', $hex);
}

# The I/O workers of 18+, which may read for a backend (none before 18).
sub io_worker_pids
{
	my ($node) = @_;
	return split /\n/, $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'io worker'");
}

# Bytes a session's backend, and the I/O workers @pids (io_worker_pids:
# taken once for a before and after, so that none is missed), made the
# kernel read from storage (readahead included): read_bytes of
# /proc/<pid>/io, read by the backend itself.
sub disk_read_bytes
{
	my ($session, @pids) = @_;
	my $sum = 0;
	for my $pid ('self', @pids)
	{
		my $io = $session->query_safe("SELECT pg_read_file('/proc/$pid/io')");
		die "no read_bytes in /proc/$pid/io: $io" unless $io =~ /^read_bytes:\s+(\d+)/m;
		$sum += $1;
	}
	return $sum;
}

# The tracker's counts the worker's progress is judged by: folios sent
# (BPF counters: since the loader made the maps) and records read (the
# module's: since server start).  A round that restarts the server takes
# them first and passes them to worker_settled as $since.
sub tracker_counts
{
	my ($node) = @_;
	my %c = map { $_ => stat_value($node, $_) }
	  qw(folios_added_scan folios_promoted records_read);
	return \%c;
}

# Wait (at most $timeout s) until the worker has read every record the
# tracker sent (since $since, if given: see tracker_counts), promotions
# included, and tracks no more than $budget_mb; then a moment for its last
# drop.  True if it caught up.
sub worker_settled
{
	my ($node, $budget_mb, $timeout, $since) = @_;
	my %b = $since ? %$since : (folios_added_scan => 0, folios_promoted => 0, records_read => 0);
	my $ok = wait_until(sub {
		my $c = tracker_counts($node);
		$c->{records_read} - $b{records_read} >=
		  ($c->{folios_added_scan} - $b{folios_added_scan}) + ($c->{folios_promoted} - $b{folios_promoted})
		  && stat_value($node, 'bytes_tracked') <= $budget_mb * 1048576;
	}, $timeout // 10);
	usleep(300_000);
	return $ok;
}

# ---- a table on another file system (t/023 btrfs, t/032 overlayfs) ----

# Table $name, of about 69 MB (300,000 rows), in tablespace $name at
# $location, frozen and checkpointed (no dirty page left): its size in bytes.
sub table_in_tablespace
{
	my ($node, $name, $location) = @_;
	$node->safe_psql('postgres', qq{
		SET pg_cache_ext.scan = off;
		CREATE TABLESPACE $name LOCATION '$location';
		CREATE TABLE $name (g int, pad text) TABLESPACE $name;
		INSERT INTO $name SELECT g, repeat('x', 200) FROM generate_series(1, 300000) g;
		VACUUM FREEZE $name; CHECKPOINT;
	});
	return $node->safe_psql('postgres', "SELECT pg_relation_size('$name')");
}

# The control: an unmarked cold read of $table (table_in_tablespace's, of
# $size bytes) stays cached, and the measurement sees it (DAMON, which
# would page some of it out, is paused).  The server restarts first: the
# INSERT left part of the table in shared_buffers, which the read would
# not take from the page cache (57.3 MB of 69 were read, once).
sub unmarked_cold_read_stays
{
	my ($node, $table, $size) = @_;
	pause_damon();
	$node->restart;
	root('drop-caches');
	$node->safe_psql('postgres', "SET pg_cache_ext.scan = off; SELECT count(*) FROM $table");
	my $cached = relation_cached_mb($node, $table);
	cmp_ok($cached, '>', 0.9 * $size / 1048576,
		sprintf('control: an unmarked cold read of the table leaves 90%% of it cached, and it is counted (%s of %.1f MB)',
			$cached, $size / 1048576));
	return;
}

# A marked cold scan of $table (of $size bytes): the tracker records it,
# the worker catches up, and the table ends within the budget plus one
# extent, its extents dropped and bytes_dropped counting most of what
# left.  $where ends each test's name.
sub marked_cold_scan_within_budget
{
	my ($node, $table, $size, $budget_mb, $where) = @_;
	my $mb = 1048576;
	root('drop-caches');
	my %before = map { $_ => stat_value($node, $_) }
	  qw(files_not_found extents_dropped bytes_dropped folios_added_scan);
	my $since = tracker_counts($node);
	$node->safe_psql('postgres', "SET pg_cache_ext.scan = on; SELECT count(*) FROM $table");
	cmp_ok(stat_value($node, 'folios_added_scan') - $before{folios_added_scan}, '>', 0,
		"the tracker recorded the marked scan's folios$where");
	ok(worker_settled($node, $budget_mb, 20, $since),
		"the worker read every record and is within budget$where");
	my $cached = relation_cached_mb($node, $table);
	cmp_ok($cached, '<=', $budget_mb + 1,
		"after the marked scan, the table holds <= budget + one extent ($cached MB)$where")
	  or diag(join ' ', map { "$_=" . stat_value($node, $_) }
		  qw(files_not_found extents_dropped bytes_dropped bytes_tracked records_read));
	cmp_ok(stat_value($node, 'extents_dropped') - $before{extents_dropped}, '>', 0,
		"the evictor dropped extents of the table$where");
	my $dropped = stat_value($node, 'bytes_dropped') - $before{bytes_dropped};
	# (one run on btrfs counted 52 of the 60 MB that left: not explained yet)
	cmp_ok($dropped, '>=', ($size - ($budget_mb + 1) * $mb) / 2,
		sprintf('bytes_dropped counts most of what left the cache (%.1f MB of %.1f MB)%s',
			$dropped / $mb, ($size / $mb) - $cached, $where));
	note("files not found meanwhile$where: "
		  . (stat_value($node, 'files_not_found') - $before{files_not_found}));
	return;
}

1;
