/*
 * report.c
 *		The loader's two ways of speaking: one line of progress on stdout,
 *		or one line of error on stderr and exit status 1.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

void
pce_fail(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "pg_cache_ext_loader: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void
pce_info(const char *fmt,...)
{
	va_list		ap;

	printf("pg_cache_ext_loader: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}
