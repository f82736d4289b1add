/* The experiment file: a libconfig file validated against hetseq's schema (src/config_schema.c).
 * Every key has a type, a default and a range in the schema; the getters return the file's value or
 * the default. Unknown keys, wrong types and out-of-range values are user errors naming file, line and
 * key (with the closest valid key for a typo). The value of a `-o group.key=value` override is read by
 * libconfig as in the file and checked the same way (plus the command-line conveniences of
 * docs/configuration.md: a string without quotes, yes/no/on/off/1/0 for a boolean, no L needed beyond
 * 32 bits). An integer literal is accepted where a float is expected. */
#ifndef HS_CONFIG_H
#define HS_CONFIG_H

#include <stdint.h>

typedef struct hs_config hs_config;

typedef enum { HS_CFG_INT, HS_CFG_FLOAT, HS_CFG_BOOL, HS_CFG_STRING, HS_CFG_FLOAT_LIST, HS_CFG_INT_LIST } hs_cfg_type;

/* One schema entry. Lists: default_str holds the default in libconfig syntax, e.g. "[0.9, 0.999]". */
typedef struct hs_cfg_key {
    const char *path;        /* "optimizer.lr" or "seed" */
    hs_cfg_type type;
    const char *default_str; /* default as libconfig literal text: "0.25", "\"adam\"", "true", "[1]" */
    double min, max;         /* numeric range (inclusive); for lists, per element; min > max: no range;
                              * +-INFINITY for a one-sided range (values must still be finite) */
    const char *choices;     /* strings: "|"-separated allowed values, or NULL */
    const char *doc;         /* one line for docs and --help-config */
    unsigned open;           /* HS_CFG_OPEN_MIN / HS_CFG_OPEN_MAX: that bound is exclusive; HS_CFG_EMPTY_LIST */
    int list_len;            /* lists: required number of elements; 0 = any number >= 1 */
} hs_cfg_key;

#define HS_CFG_OPEN_MIN 1u
#define HS_CFG_OPEN_MAX 2u
#define HS_CFG_EMPTY_LIST 4u /* lists: [] is allowed (meaning "not given") */

extern const hs_cfg_key hs_cfg_schema[];
extern const int hs_cfg_schema_count;

/* The schema entry for a path ("optimizer.lr"), or NULL if the schema has no such key. */
const hs_cfg_key *hs_cfg_schema_find(const char *path);

/* Load and validate a file, then apply overrides ("group.key=value"). Errors end every rank via
 * hs_die_all (all ranks parse the same file), after releasing everything the load allocated. */
hs_config *hs_config_load(const char *path, int n_overrides, char *const *overrides);
/* The same from text (e.g. the config stored in a checkpoint); origin names it in messages. */
hs_config *hs_config_load_string(const char *text, const char *origin, int n_overrides, char *const *overrides);
void hs_config_free(hs_config *c);

/* Typed getters; asking for a key the schema does not have, or with the wrong type, is a bug (fatal). */
int64_t hs_cfg_int(const hs_config *c, const char *path);
double hs_cfg_float(const hs_config *c, const char *path);
int hs_cfg_bool(const hs_config *c, const char *path);
const char *hs_cfg_string(const hs_config *c, const char *path); /* owned by the config */
int hs_cfg_list_len(const hs_config *c, const char *path);
double hs_cfg_float_elem(const hs_config *c, const char *path, int i);
int64_t hs_cfg_int_elem(const hs_config *c, const char *path, int i);
/* Where a key was set: "file:line", "default", or the override itself ("-o optimizer.lr=0.1"). */
const char *hs_cfg_origin(const hs_config *c, const char *path, char *buf, int buflen);

/* The effective configuration (every schema key with its value, defaults included) as libconfig text.
 * Caller frees. Printed by rank 0 at start and stored in every checkpoint. */
char *hs_config_to_string(const hs_config *c);

#endif
