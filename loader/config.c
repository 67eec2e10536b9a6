/*
 * config.c
 *		Read the pg_cache_ext.* settings the loader needs from the cluster's
 *		configuration files, so that postgresql.conf is the one place where
 *		pg_cache_ext is configured.
 *
 * The loader runs before the server (ExecStartPre), so it cannot ask the
 * server; it reads the files itself, with PostgreSQL's syntax: "name = value"
 * or "name value", a value quoted with '...' ('' or \' for a quote) or a bare
 * word, '#' to the end of the line.  Later lines win, and
 * postgresql.auto.conf (ALTER SYSTEM) is read after postgresql.conf, as the
 * server does.  include directives are not followed: the loader says so,
 * and the settings can go on its command line instead.
 *
 * Everything read here is outside input: the parser never reads past its
 * buffer, bounds every value, and is fuzzed (fuzz/fuzz_loader_config.c).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"

const char *const pce_conf_names[PCE_CONF__COUNT] = {
	[PCE_CONF_MODE] = "pg_cache_ext.mode",
	[PCE_CONF_BPFFS_DIR] = "pg_cache_ext.bpffs_dir",
	[PCE_CONF_CGROUP] = "pg_cache_ext.cgroup",
};

static const char *
skip_blanks(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/*
 * Parse one line [p, end).  On a setting, copies its name and value (both
 * bounded) and returns 1; returns 0 for a blank or comment line, -1 with a
 * reason for a malformed one.
 */
static int
parse_line(const char *p, const char *end, char *name, size_t namelen,
		   char *value, size_t valuelen, const char **why)
{
	size_t		n = 0;

	p = skip_blanks(p, end);
	if (p == end || *p == '#')
		return 0;
	while (p < end && (isalnum((unsigned char) *p) || *p == '_' || *p == '.' || *p == '-'))
	{
		if (n + 1 >= namelen)
		{
			name[n] = '\0';
			*why = "name too long";
			return -1;
		}
		name[n++] = (char) tolower((unsigned char) *p++);
	}
	name[n] = '\0';
	if (n == 0)
	{
		*why = "a line must start with a setting's name";
		return -1;
	}
	p = skip_blanks(p, end);
	if (p < end && *p == '=')
		p = skip_blanks(p + 1, end);

	n = 0;
	if (p < end && *p == '\'')
	{
		p++;
		for (;;)
		{
			char		c;

			if (p >= end)
			{
				*why = "unterminated quoted value";
				return -1;
			}
			c = *p++;
			if (c == '\'')
			{
				if (p < end && *p == '\'')
					p++;		/* '' is a quote */
				else
					break;
			}
			else if (c == '\\' && p < end)
				c = *p++;		/* \' and \\ */
			if (n + 1 >= valuelen)
			{
				*why = "value too long";
				return -1;
			}
			value[n++] = c;
		}
	}
	else
	{
		while (p < end && *p != '#' && *p != ' ' && *p != '\t' && *p != '\r')
		{
			if (n + 1 >= valuelen)
			{
				*why = "value too long";
				return -1;
			}
			value[n++] = *p++;
		}
		if (n == 0)
		{
			*why = "missing value";
			return -1;
		}
	}
	value[n] = '\0';
	p = skip_blanks(p, end);
	if (p < end && *p != '#')
	{
		*why = "unexpected text after the value";
		return -1;
	}
	return 1;
}

int
pce_parse_config_text(const char *text, size_t len, const char *source,
					  struct pce_loader_config *conf, char *err, size_t errlen)
{
	const char *p = text;
	const char *end = text + len;
	int			lineno = 0;

	while (p < end)
	{
		const char *eol = memchr(p, '\n', end - p);
		char		name[128];
		char		value[PCE_CONF_VALUE_MAX];
		const char *why = NULL;
		int			rc;

		if (!eol)
			eol = end;
		lineno++;
		rc = parse_line(p, eol, name, sizeof(name), value, sizeof(value), &why);
		p = eol + 1;
		if (rc < 0)
		{
			/* a line that does not concern us may be anything the server accepts */
			if (strncasecmp(name, "pg_cache_ext.", 13) != 0)
				continue;
			snprintf(err, errlen, "%s line %d: %s", source, lineno, why);
			return -1;
		}
		if (rc == 0)
			continue;
		if (strcmp(name, "include") == 0 || strcmp(name, "include_if_exists") == 0 ||
			strcmp(name, "include_dir") == 0)
		{
			conf->includes_skipped++;
			continue;
		}
		for (int i = 0; i < PCE_CONF__COUNT; i++)
		{
			if (strcmp(name, pce_conf_names[i]) != 0)
				continue;
			memcpy(conf->value[i], value, strlen(value) + 1);
			snprintf(conf->where[i], sizeof(conf->where[i]), "%s line %d", source, lineno);
		}
	}
	return 0;
}

int
pce_read_config_file(const char *path, bool missing_ok, struct pce_loader_config *conf,
					 char *err, size_t errlen)
{
	FILE	   *f = fopen(path, "r");
	char	   *text;
	size_t		len;
	int			rc;

	if (!f)
	{
		if (missing_ok && errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(errno));
		return -1;
	}
	text = malloc(PCE_CONF_FILE_MAX + 1);
	if (!text)
	{
		fclose(f);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	len = fread(text, 1, PCE_CONF_FILE_MAX + 1, f);
	fclose(f);
	if (len > PCE_CONF_FILE_MAX)
	{
		free(text);
		snprintf(err, errlen, "\"%s\" is larger than %d bytes", path, PCE_CONF_FILE_MAX);
		return -1;
	}
	rc = pce_parse_config_text(text, len, path, conf, err, errlen);
	free(text);
	return rc;
}
