/*
 * pce_modes.h
 *		The names of pg_cache_ext.mode (and the loader's --mode), one table
 *		for the server's GUC and the loader's parser, so that a value one of
 *		them accepts the other accepts too.
 *
 * PostgreSQL matches enum values without regard to case ('AUTO' is auto),
 * so the loader must too: pce_mode_canonical() does.  Plain C without libc
 * (not BPF code), like pce_paths.h.
 */
#ifndef PCE_MODES_H
#define PCE_MODES_H

/* X(symbol, name): every mode, in the GUC's order */
#define PCE_MODE_TABLE(X) \
	X(PCE_MODE_OFF, "off") \
	X(PCE_MODE_AUTO, "auto") \
	X(PCE_MODE_STOCK, "stock") \
	X(PCE_MODE_CACHE_EXT, "cache_ext")

/* for messages: keep in step with the table */
#define PCE_MODE_CHOICES "auto, stock, cache_ext or off"

#define PCE_MODE_ENUM_ENTRY(sym, name) sym,
typedef enum PceMode
{
	PCE_MODE_TABLE(PCE_MODE_ENUM_ENTRY)
} PceMode;
#undef PCE_MODE_ENUM_ENTRY

/* ASCII letters only: the names are ASCII, and PostgreSQL folds so too */
static inline int
pce_mode_name_equal(const char *a, const char *b)
{
	for (;; a++, b++)
	{
		char		ca = (*a >= 'A' && *a <= 'Z') ? (char) (*a + 'a' - 'A') : *a;
		char		cb = (*b >= 'A' && *b <= 'Z') ? (char) (*b + 'a' - 'A') : *b;

		if (ca != cb)
			return 0;
		if (ca == '\0')
			return 1;
	}
}

/*
 * The table's spelling of a mode given in any case, or NULL if it names no
 * mode: "AUTO" gives "auto".
 */
static inline const char *
pce_mode_canonical(const char *given)
{
#define PCE_MODE_MATCH(sym, name) \
	if (pce_mode_name_equal(given, name)) \
		return name;
	PCE_MODE_TABLE(PCE_MODE_MATCH)
#undef PCE_MODE_MATCH
	return 0;
}

#endif							/* PCE_MODES_H */
