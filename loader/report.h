/*
 * report.h
 *		The loader's messages (report.c): every line starts with
 *		"pg_cache_ext_loader: ".
 */
#ifndef PCE_LOADER_REPORT_H
#define PCE_LOADER_REPORT_H

/* "pg_cache_ext_loader: error: ..." on stderr, then exit(1) */
extern void pce_fail(const char *fmt,...) __attribute__((format(printf, 1, 2), noreturn));

/* "pg_cache_ext_loader: ..." on stdout */
extern void pce_info(const char *fmt,...) __attribute__((format(printf, 1, 2)));

#endif
