/* The experiment file: libconfig text validated against hs_cfg_schema[] into one typed value per
 * schema key. Values come from, in increasing priority: the schema default, the file, `-o` overrides.
 *
 * libconfig 1.5 quirks handled here (see docs/configuration.md):
 *  - config_lookup_float fails on an integer literal, so every setting is read by its libconfig type
 *    and converted by the schema type (an int literal is a valid float; a float literal is not an int);
 *  - an integer literal beyond 32 bits without an `L` suffix (and any literal beyond 64 bits) is
 *    silently wrapped or clamped by the 1.5 scanner, so the text is scanned for such literals before
 *    parsing: the file's are reported, an override's get the `L` it lacks;
 *  - reading a second text replaces the first, so each override value (and each schema default) is
 *    parsed on its own by libconfig, as the text "value = <value>", and that setting is checked exactly
 *    like a setting of the file.
 *
 * A user error releases everything the load holds before hs_die_all: the fuzz harness's hs_die_all
 * returns to its entry point, and its leak checker must see no memory left behind. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "util/check.h"

/* One key's effective value. Scalars use i/f/b/s by type; lists use n with ilist or flist. */
typedef struct {
    int64_t i;
    double f;
    int b;
    char *s;
    int n;
    int64_t *ilist;
    double *flist;
    char *origin; /* "file:line", "default" or "-o group.key=value" */
} hs_cfg_value;

struct hs_config {
    hs_cfg_value *v; /* v[hs_cfg_schema_count], in schema order */
};

/* A value being parsed, before it is checked and stored. */
typedef struct {
    int n;
    int64_t *ilist; /* HS_CFG_INT and HS_CFG_INT_LIST */
    double *flist;  /* HS_CFG_FLOAT and HS_CFG_FLOAT_LIST */
    int b;
    char *s;
} parsed_value;

/* Everything one load holds, so that an error can release it all before dying (see the top). */
typedef struct {
    hs_config *c;            /* the configuration being built */
    const char *origin;      /* the file's path, or the name given to a string */
    const char *include_dir; /* directory of the experiment file (points into dir); NULL for a string */
    char *dir;
    char *file_text;         /* hs_config_load: the experiment file */
    char *include_text;      /* an @include'd file while it is scanned for long literals */
    char **scanned;          /* display names of the files already scanned for long literals */
    int n_scanned;
    config_t file_cfg;       /* the experiment file's libconfig tree */
    int file_cfg_live;
    config_t value_cfg;      /* one override's or default's value as parsed by libconfig */
    int value_cfg_live;
    char *value_text;        /* the libconfig text "value = ..." behind value_cfg */
    char *override;          /* a copy of the override being applied (its key is cut out of it) */
    char *where;             /* "-o group.key=value" of that override */
    parsed_value pending;    /* the value being checked */
    int in_override;         /* parsing an -o value: the command-line conveniences apply */
} load_state;

static void parsed_free(parsed_value *p) {
    free(p->ilist);
    free(p->flist);
    free(p->s);
    memset(p, 0, sizeof *p);
}

/* Frees everything the load holds, the configuration included (if still held). */
static void load_release(load_state *ls) {
    hs_config_free(ls->c);
    free(ls->dir);
    free(ls->file_text);
    free(ls->include_text);
    for (int i = 0; i < ls->n_scanned; i++) free(ls->scanned[i]);
    free(ls->scanned);
    if (ls->file_cfg_live) config_destroy(&ls->file_cfg);
    if (ls->value_cfg_live) config_destroy(&ls->value_cfg);
    free(ls->value_text);
    free(ls->override);
    free(ls->where);
    parsed_free(&ls->pending);
    memset(ls, 0, sizeof *ls);
}

/* A user error: the message is formatted first (its arguments may point into what the load holds),
 * then the load is released, then every rank ends. */
_Noreturn static void load_die(load_state *ls, const char *fmt, ...) HS_PRINTF(2, 3);
_Noreturn static void load_die(load_state *ls, const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    load_release(ls);
    hs_die_all("%s", msg);
}
/* ================================================================================================
 * Schema lookup and suggestions
 * ============================================================================================== */

static int schema_index(const char *path) {
    for (int k = 0; k < hs_cfg_schema_count; k++)
        if (strcmp(hs_cfg_schema[k].path, path) == 0) return k;
    return -1;
}

const hs_cfg_key *hs_cfg_schema_find(const char *path) {
    int k = schema_index(path);
    return k < 0 ? NULL : &hs_cfg_schema[k];
}

/* The part of a path after its last '.', i.e. the key's own name. */
static const char *leaf_of(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

/* Length of the group part of a path ("optimizer" of "optimizer.lr"), 0 for a top-level key. */
static size_t group_len(const char *path) {
    const char *dot = strchr(path, '.');
    return dot ? (size_t)(dot - path) : 0;
}

/* Does some schema key live in group `name` (a path prefix "name.")? */
static int is_group(const char *name) {
    size_t n = strlen(name);
    for (int k = 0; k < hs_cfg_schema_count; k++)
        if (strncmp(hs_cfg_schema[k].path, name, n) == 0 && hs_cfg_schema[k].path[n] == '.') return 1;
    return 0;
}

/* Levenshtein distance (insert, delete, substitute cost 1), two rows. */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    int *prev, *cur;
    HS_ALLOC(prev, lb + 1);
    HS_ALLOC(cur, lb + 1);
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        int *t = prev;
        prev = cur;
        cur = t;
    }
    int d = prev[lb];
    free(prev);
    free(cur);
    return d;
}

/* A close-enough candidate: at most a third of the word's letters wrong (at least 2 allowed). */
static int close_enough(int dist, const char *word) {
    int len = (int)strlen(word);
    return dist <= (len / 3 > 2 ? len / 3 : 2);
}

/* The schema path closest to an unknown `path`: a key of the same name in another group first (a
 * known key put in the wrong group), else the nearest path by edit distance. NULL if none is close. */
static const char *suggest_path(const char *path) {
    const char *leaf = leaf_of(path), *best = NULL;
    int best_d = INT_MAX;
    for (int k = 0; k < hs_cfg_schema_count; k++) {
        if (strcmp(leaf_of(hs_cfg_schema[k].path), leaf) != 0) continue;
        int d = edit_distance(path, hs_cfg_schema[k].path);
        if (d < best_d) best_d = d, best = hs_cfg_schema[k].path;
    }
    if (best) return best;
    for (int k = 0; k < hs_cfg_schema_count; k++) {
        int d = edit_distance(path, hs_cfg_schema[k].path);
        if (d < best_d) best_d = d, best = hs_cfg_schema[k].path;
    }
    return best && close_enough(best_d, path) ? best : NULL;
}

/* The group name closest to an unknown group `name`, or NULL. */
static const char *suggest_group(const char *name, char *buf, size_t buflen) {
    int best_d = INT_MAX;
    for (int k = 0; k < hs_cfg_schema_count; k++) {
        const char *p = hs_cfg_schema[k].path, *dot = strchr(p, '.');
        if (!dot) continue;
        char group[64];
        size_t n = (size_t)(dot - p) < sizeof group - 1 ? (size_t)(dot - p) : sizeof group - 1;
        memcpy(group, p, n);
        group[n] = '\0';
        int d = edit_distance(name, group);
        if (d < best_d) {
            best_d = d;
            snprintf(buf, buflen, "%s", group);
        }
    }
    return best_d != INT_MAX && close_enough(best_d, name) ? buf : NULL;
}

/* The allowed choice closest to a rejected string value, or NULL (written into buf). */
static const char *suggest_choice(const char *choices, const char *value, char *buf, size_t buflen) {
    int best_d = INT_MAX;
    const char *p = choices;
    while (*p) {
        size_t n = strcspn(p, "|");
        char choice[64];
        snprintf(choice, sizeof choice, "%.*s", (int)n, p);
        int d = edit_distance(value, choice);
        if (d < best_d) {
            best_d = d;
            snprintf(buf, buflen, "%s", choice);
        }
        p += n + (p[n] == '|');
    }
    return best_d != INT_MAX && close_enough(best_d, value) ? buf : NULL;
}

_Noreturn static void die_unknown_key(load_state *ls, const char *where, const char *path) {
    const char *hint = suggest_path(path);
    if (hint)
        load_die(ls, "%s: unknown key '%s'; did you mean '%s'? (every key is listed in docs/configuration.md)", where,
                 path, hint);
    load_die(ls, "%s: unknown key '%s' (every key is listed in docs/configuration.md)", where, path);
}

/* ================================================================================================
 * Describing types, ranges and values for messages
 * ============================================================================================== */

/* An override also takes yes/no, on/off and 1/0 for a boolean (docs/configuration.md). */
static const char *type_name(const load_state *ls, hs_cfg_type t) {
    switch (t) {
    case HS_CFG_INT: return "an integer";
    case HS_CFG_FLOAT: return "a number";
    case HS_CFG_BOOL:
        return ls && ls->in_override ? "a boolean (true/false, yes/no, on/off, 1/0)" : "a boolean (true or false)";
    case HS_CFG_STRING: return "a string in double quotes";
    case HS_CFG_FLOAT_LIST: return "a list of numbers, e.g. [0.9, 0.999]";
    case HS_CFG_INT_LIST: return "an integer or a list of integers, e.g. [1, 2, 4]";
    }
    return "?";
}
/* A number as short as it reads exactly enough for a message. */
static void fmt_num(char *buf, size_t len, double x) {
    if (isinf(x)) snprintf(buf, len, "%s", x > 0 ? "inf" : "-inf");
    else snprintf(buf, len, "%.15g", x);
}

/* "value >= 0", "0 <= value < 1", "one of \"adam\", \"lamb\"" ... */
static void describe_allowed(const hs_cfg_key *key, char *buf, size_t len) {
    if (key->choices) {
        size_t used = (size_t)snprintf(buf, len, "one of ");
        const char *p = key->choices;
        while (*p && used < len) {
            size_t n = strcspn(p, "|");
            used += (size_t)snprintf(buf + used, len - used, "\"%.*s\"%s", (int)n, p, p[n] ? ", " : "");
            p += n + (p[n] == '|');
        }
        return;
    }
    char lo[40], hi[40];
    fmt_num(lo, sizeof lo, key->min);
    fmt_num(hi, sizeof hi, key->max);
    const char *lo_op = (key->open & HS_CFG_OPEN_MIN) ? "<" : "<=";
    const char *hi_op = (key->open & HS_CFG_OPEN_MAX) ? "<" : "<=";
    if (isinf(key->min) && isinf(key->max)) snprintf(buf, len, "any finite number");
    else if (isinf(key->max)) snprintf(buf, len, "value %s %s", (key->open & HS_CFG_OPEN_MIN) ? ">" : ">=", lo);
    else if (isinf(key->min)) snprintf(buf, len, "value %s %s", hi_op, hi);
    else snprintf(buf, len, "%s %s value %s %s", lo, lo_op, hi_op, hi);
}

static int has_range(const hs_cfg_key *key) { return key->min <= key->max; }

static int in_range(const hs_cfg_key *key, double x) {
    if (!isfinite(x)) return 0;
    if (!has_range(key)) return 1;
    if ((key->open & HS_CFG_OPEN_MIN) ? !(x > key->min) : !(x >= key->min)) return 0;
    if ((key->open & HS_CFG_OPEN_MAX) ? !(x < key->max) : !(x <= key->max)) return 0;
    return 1;
}

/* What a libconfig setting holds, for "found ..." in type errors. */
static void describe_setting(const config_setting_t *s, char *buf, size_t len) {
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: snprintf(buf, len, "the integer %lld", config_setting_get_int64(s)); break;
    case CONFIG_TYPE_FLOAT: snprintf(buf, len, "the number %.15g", config_setting_get_float(s)); break;
    case CONFIG_TYPE_STRING: snprintf(buf, len, "the string \"%s\"", config_setting_get_string(s)); break;
    case CONFIG_TYPE_BOOL: snprintf(buf, len, "the boolean %s", config_setting_get_bool(s) ? "true" : "false"); break;
    case CONFIG_TYPE_GROUP: snprintf(buf, len, "a group { ... }"); break;
    case CONFIG_TYPE_ARRAY:
    case CONFIG_TYPE_LIST: snprintf(buf, len, "a list of %d element(s)", config_setting_length(s)); break;
    default: snprintf(buf, len, "a setting of libconfig type %d", config_setting_type(s)); break;
    }
}


/* ================================================================================================
 * Checking and storing a parsed value
 * ============================================================================================== */

static void value_clear(hs_cfg_value *v) {
    free(v->s);
    free(v->ilist);
    free(v->flist);
    free(v->origin);
    memset(v, 0, sizeof *v);
}

/* Range, choices and list length of ls->pending; `where` is "file:line" or "-o key=value". Stores the
 * value as key k's and empties ls->pending. */
static void check_and_store(load_state *ls, int k, const char *where) {
    const hs_cfg_key *key = &hs_cfg_schema[k];
    parsed_value *p = &ls->pending;
    char allowed[512];
    int is_list = key->type == HS_CFG_INT_LIST || key->type == HS_CFG_FLOAT_LIST;
    if (is_list && p->n == 0 && !(key->open & HS_CFG_EMPTY_LIST))
        load_die(ls, "%s: %s: the list is empty; expected %s", where, key->path, type_name(ls, key->type));
    if (is_list && key->list_len && p->n != key->list_len)
        load_die(ls, "%s: %s: expected a list of exactly %d numbers, found %d", where, key->path, key->list_len, p->n);

    switch (key->type) {
    case HS_CFG_INT:
    case HS_CFG_INT_LIST:
    case HS_CFG_FLOAT:
    case HS_CFG_FLOAT_LIST:
        for (int e = 0; e < p->n; e++) {
            int is_int = key->type == HS_CFG_INT || key->type == HS_CFG_INT_LIST;
            double x = is_int ? (double)p->ilist[e] : p->flist[e];
            if (in_range(key, x)) continue;
            describe_allowed(key, allowed, sizeof allowed);
            char num[64];
            if (is_int) snprintf(num, sizeof num, "%lld", (long long)p->ilist[e]);
            else fmt_num(num, sizeof num, x);
            if (is_list)
                load_die(ls, "%s: %s: element %d is %s, out of range; allowed: %s", where, key->path, e + 1, num,
                         allowed);
            load_die(ls, "%s: %s = %s is out of range; allowed: %s", where, key->path, num, allowed);
        }
        break;
    case HS_CFG_STRING:
        if (key->choices) {
            int ok = 0;
            const char *q = key->choices;
            while (*q && !ok) {
                size_t n = strcspn(q, "|");
                ok = strlen(p->s) == n && strncmp(q, p->s, n) == 0;
                q += n + (q[n] == '|');
            }
            if (!ok) {
                char near[64];
                const char *hint = suggest_choice(key->choices, p->s, near, sizeof near);
                describe_allowed(key, allowed, sizeof allowed);
                if (hint)
                    load_die(ls, "%s: %s = \"%s\" is not allowed; did you mean \"%s\"? allowed: %s", where, key->path,
                             p->s, hint, allowed);
                load_die(ls, "%s: %s = \"%s\" is not allowed; allowed: %s", where, key->path, p->s, allowed);
            }
        }
        break;
    case HS_CFG_BOOL: break;
    }

    hs_cfg_value *v = &ls->c->v[k];
    value_clear(v);
    v->origin = HS_STRDUP(where);
    switch (key->type) {
    case HS_CFG_INT: v->i = p->ilist[0]; break;
    case HS_CFG_FLOAT: v->f = p->flist[0]; break;
    case HS_CFG_BOOL: v->b = p->b; break;
    case HS_CFG_STRING: v->s = p->s, p->s = NULL; break;
    case HS_CFG_INT_LIST: v->n = p->n, v->ilist = p->ilist, p->ilist = NULL; break;
    case HS_CFG_FLOAT_LIST: v->n = p->n, v->flist = p->flist, p->flist = NULL; break;
    }
    parsed_free(p);
}

/* ================================================================================================
 * Values from libconfig settings (the file, and each override value parsed on its own)
 * ============================================================================================== */

_Noreturn static void die_type(load_state *ls, const char *where, const hs_cfg_key *key,
                               const config_setting_t *found, const char *advice) {
    char what[256];
    describe_setting(found, what, sizeof what);
    /* `-o optimizer.lr="0.1"`: the quotes are the mistake */
    if (ls->in_override && !*advice && config_setting_type(found) == CONFIG_TYPE_STRING && key->type != HS_CFG_STRING)
        advice = " (leave out the double quotes)";
    load_die(ls, "%s: %s: expected %s, found %s%s", where, key->path, type_name(ls, key->type), what, advice);
}

/* One number of a setting as the schema wants it; an int literal is a valid float, not vice versa. */
static void number_from_setting(load_state *ls, const config_setting_t *s, const hs_cfg_key *key,
                                const config_setting_t *whole, const char *where, int is_int, int64_t *iv,
                                double *fv) {
    int t = config_setting_type(s);
    if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
        long long x = config_setting_get_int64(s);
        if (is_int) *iv = x;
        else *fv = (double)x;
        return;
    }
    if (t == CONFIG_TYPE_FLOAT && !is_int) {
        *fv = config_setting_get_float(s);
        return;
    }
    if (t == CONFIG_TYPE_FLOAT) die_type(ls, where, key, s, " (write a whole number without a decimal point)");
    die_type(ls, where, key, whole, "");
}

static void value_from_setting(load_state *ls, int k, const config_setting_t *s, const char *where) {
    const hs_cfg_key *key = &hs_cfg_schema[k];
    parsed_value *p = &ls->pending;
    parsed_free(p);
    int t = config_setting_type(s);
    switch (key->type) {
    case HS_CFG_INT:
    case HS_CFG_FLOAT:
        p->n = 1;
        HS_ALLOC(p->ilist, 1);
        HS_ALLOC(p->flist, 1);
        number_from_setting(ls, s, key, s, where, key->type == HS_CFG_INT, &p->ilist[0], &p->flist[0]);
        break;
    case HS_CFG_BOOL:
        if (t != CONFIG_TYPE_BOOL) die_type(ls, where, key, s, "");
        p->b = config_setting_get_bool(s);
        break;
    case HS_CFG_STRING:
        if (t != CONFIG_TYPE_STRING) die_type(ls, where, key, s, "");
        p->s = HS_STRDUP(config_setting_get_string(s));
        break;
    case HS_CFG_INT_LIST:
    case HS_CFG_FLOAT_LIST: {
        int is_int = key->type == HS_CFG_INT_LIST;
        if (t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST) {
            p->n = config_setting_length(s);
            HS_ALLOC(p->ilist, p->n);
            HS_ALLOC(p->flist, p->n);
            for (int e = 0; e < p->n; e++) {
                const config_setting_t *el = config_setting_get_elem(s, (unsigned)e);
                int et = config_setting_type(el);
                if (et != CONFIG_TYPE_INT && et != CONFIG_TYPE_INT64 && et != CONFIG_TYPE_FLOAT)
                    die_type(ls, where, key, s, " with a non-number element");
                number_from_setting(ls, el, key, s, where, is_int, &p->ilist[e], &p->flist[e]);
            }
        } else if (config_setting_is_number(s)) { /* a scalar is a list of one */
            p->n = 1;
            HS_ALLOC(p->ilist, 1);
            HS_ALLOC(p->flist, 1);
            number_from_setting(ls, s, key, s, where, is_int, &p->ilist[0], &p->flist[0]);
        } else {
            die_type(ls, where, key, s, "");
        }
        break;
    }
    }
    check_and_store(ls, k, where);
}

/* ================================================================================================
 * Integer literals libconfig 1.5 would change
 * ============================================================================================== */

/* libconfig 1.5 reads an integer literal without `L` into a 32-bit int, silently wrapping a value
 * beyond it (seed = 4294967295 becomes -1, 0xFFFFFFFF too), and clamps or wraps one beyond 64 bits
 * even with `L`. Such a literal, as found by next_long_literal: */
typedef struct {
    const char *start, *end; /* its digits ("0x..." included, the sign and the L not) */
    int line;
    int neg;                 /* a '-' precedes it */
    int beyond_64;           /* no suffix helps; else an L suffix makes libconfig read it right */
} long_literal;

/* The next such literal at or after *pos, scanning like libconfig's lexer (comments, strings, names
 * and floats skipped); *pos moves past it and *line counts the lines. Returns 0 at the end. With
 * every_int, every integer literal without L is returned (beyond_64 still says whether L helps). */
static int next_long_literal(const char *text, const char **pos, int *line, int every_int, long_literal *out) {
    const char *p = *pos;
    while (*p) {
        if (*p == '\n') {
            (*line)++, p++;
        } else if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
            while (*p && *p != '\n') p++;
        } else if (p[0] == '/' && p[1] == '*') {
            for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++) *line += *p == '\n';
            if (*p) p += 2;
        } else if (*p == '"') {
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && p[1]) p++;
                *line += *p == '\n';
            }
            if (*p) p++;
        } else if (isalpha((unsigned char)*p) || *p == '*' || *p == '_' || *p == '@') {
            while (isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '*' || *p == '@') p++;
        } else if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
            const char *start = p;
            int neg = p > text && p[-1] == '-';
            unsigned long long limit32, limit64, mag;
            errno = 0;
            if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
                p += 2;
                while (isxdigit((unsigned char)*p)) p++;
                if (p == start + 2) continue; /* "0x" alone: libconfig's syntax error */
                mag = strtoull(start + 2, NULL, 16);
                limit32 = 0x7FFFFFFFull; /* 0x80000000 .. 0xFFFFFFFF wrap to negative ints */
                limit64 = 0x7FFFFFFFFFFFFFFFull;
            } else {
                while (isdigit((unsigned char)*p)) p++;
                if (*p == '.' || *p == 'e' || *p == 'E') { /* a float: skip its fraction and exponent */
                    while (isdigit((unsigned char)*p) || *p == '.') p++;
                    if (*p == 'e' || *p == 'E') {
                        p++;
                        if (*p == '+' || *p == '-') p++;
                        while (isdigit((unsigned char)*p)) p++;
                    }
                    continue;
                }
                mag = strtoull(start, NULL, 10);
                limit32 = neg ? 2147483648ull : 2147483647ull;
                limit64 = neg ? 9223372036854775808ull : 9223372036854775807ull;
            }
            int has_l = *p == 'L';
            int beyond_64 = errno == ERANGE || mag > limit64;
            if (beyond_64 || (!has_l && (every_int || mag > limit32))) {
                *out = (long_literal){start, p, *line, neg, beyond_64};
                *pos = p;
                return 1;
            }
        } else {
            p++;
        }
    }
    *pos = p;
    return 0;
}

_Noreturn static void die_beyond_64(load_state *ls, const char *where, const long_literal *l) {
    load_die(ls, "%s: the integer %s%.*s is beyond 64 bits; libconfig reads integers from -9223372036854775808L to "
             "9223372036854775807L", where, l->neg ? "-" : "", (int)(l->end - l->start), l->start);
}

/* The file's text must hold no such literal: report the first with its line and the fix. */
static void check_int_literals(load_state *ls, const char *text, const char *file) {
    const char *pos = text;
    int line = 1;
    long_literal l;
    if (!next_long_literal(text, &pos, &line, 0, &l)) return;
    char where[1100];
    snprintf(where, sizeof where, "%s:%d", file, l.line);
    if (l.beyond_64) die_beyond_64(ls, where, &l);
    load_die(ls, "%s: the integer %s%.*s does not fit in 32 bits; libconfig needs an L suffix for larger integers: "
             "write %s%.*sL", where, l.neg ? "-" : "", (int)(l.end - l.start), l.start, l.neg ? "-" : "",
             (int)(l.end - l.start), l.start);
}

/* ================================================================================================
 * Values of `-o` overrides, parsed by libconfig
 * ============================================================================================== */

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

/* "value = <text>\n" for libconfig, with the L suffix added to integers beyond 32 bits (the docs
 * promise `-o seed=4294967295` works without it). Once one literal needs it, every integer literal
 * gets it: libconfig's [ ] arrays refuse a mix of 32- and 64-bit integers. The newline ends a
 * trailing # comment. */
static char *value_libconfig_text(load_state *ls, const char *text, const char *where) {
    static const char head[] = "value = ";
    const char *pos = text;
    int line = 1, every_int = 0;
    long_literal l;
    while (next_long_literal(text, &pos, &line, 0, &l)) {
        if (l.beyond_64) die_beyond_64(ls, where, &l);
        every_int = 1;
    }
    size_t extra = 0;
    for (pos = text; every_int && next_long_literal(text, &pos, &line, 1, &l);) extra++;
    char *out;
    HS_ALLOC(out, sizeof head + strlen(text) + extra + 2);
    memcpy(out, head, sizeof head - 1);
    char *o = out + sizeof head - 1;
    const char *copied = text;
    for (pos = text; every_int && next_long_literal(text, &pos, &line, 1, &l);) {
        memcpy(o, copied, (size_t)(l.end - copied));
        o += l.end - copied;
        *o++ = 'L';
        copied = l.end;
    }
    size_t rest = strlen(copied);
    memcpy(o, copied, rest);
    o[rest] = '\n';
    o[rest + 1] = '\0';
    return out;
}

/* A value libconfig cannot read as one setting: say what the key takes. */
_Noreturn static void die_unreadable(load_state *ls, const hs_cfg_key *key, const char *t, const char *where,
                                     const char *why) {
    int is_list = key->type == HS_CFG_INT_LIST || key->type == HS_CFG_FLOAT_LIST;
    if (key->type == HS_CFG_STRING)
        load_die(ls, "%s: %s: malformed quoted string %s (write \"text\" with \\\" for a quote inside, or the text "
                 "without quotes)", where, key->path, t);
    if (is_list && (t[0] == '[' || t[0] == '(')) {
        const char *detail = strstr(why, "mismatched")
                                 ? " (the elements of [ ] must all be integers or all have a decimal point: write "
                                   "0.0, not 0, or use ( ))"
                                 : "";
        load_die(ls, "%s: %s: malformed list '%s'%s; expected %s", where, key->path, t, detail,
                 type_name(ls, key->type));
    }
    load_die(ls, "%s: %s: expected %s, found '%s'", where, key->path, type_name(ls, key->type), t);
}

/* Parse an override's value `t` (trimmed) as key k's and store it; on a malformed value, die naming
 * `where`. libconfig reads it; on top, as docs/configuration.md promises for overrides: a string
 * without double quotes is taken literally, and a boolean may be yes/no, on/off or 1/0. */
static void value_from_override(load_state *ls, int k, const char *t, const char *where) {
    const hs_cfg_key *key = &hs_cfg_schema[k];
    if (key->type == HS_CFG_STRING && t[0] != '"') {
        parsed_free(&ls->pending);
        ls->pending.s = HS_STRDUP(t);
        check_and_store(ls, k, where);
        return;
    }
    if (strpbrk(t, "\n\r"))
        load_die(ls, "%s: %s: the value spans several lines; write it on one line", where, key->path);
    if (key->type == HS_CFG_BOOL) {
        static const char *const yes[] = {"yes", "on"}, *const no[] = {"no", "off"};
        for (int i = 0; i < 2; i++) {
            if (strcasecmp(t, yes[i]) == 0) t = "true";
            if (strcasecmp(t, no[i]) == 0) t = "false";
        }
    }
    ls->value_text = value_libconfig_text(ls, t, where);
    config_init(&ls->value_cfg);
    ls->value_cfg_live = 1;
    if (!config_read_string(&ls->value_cfg, ls->value_text))
        die_unreadable(ls, key, t, where, config_error_text(&ls->value_cfg));
    const config_setting_t *root = config_root_setting(&ls->value_cfg);
    if (config_setting_length(root) != 1) die_unreadable(ls, key, t, where, ""); /* "1; x = 2" */
    const config_setting_t *s = config_setting_get_elem(root, 0);
    int st = config_setting_type(s);
    if (key->type == HS_CFG_BOOL && (st == CONFIG_TYPE_INT || st == CONFIG_TYPE_INT64) &&
        (config_setting_get_int64(s) == 0 || config_setting_get_int64(s) == 1)) {
        parsed_free(&ls->pending);
        ls->pending.b = config_setting_get_int64(s) == 1;
        check_and_store(ls, k, where);
    } else {
        value_from_setting(ls, k, s, where);
    }
    config_destroy(&ls->value_cfg);
    ls->value_cfg_live = 0;
    free(ls->value_text);
    ls->value_text = NULL;
}

/* ================================================================================================
 * Loading
 * ============================================================================================== */

/* The whole of a file as a string (NUL-terminated), or die naming it. */
static char *read_whole_file(load_state *ls, const char *path, const char *what) {
    struct stat st;
    if (stat(path, &st) != 0) load_die(ls, "cannot read %s '%s': %s", what, path, strerror(errno));
    if (S_ISDIR(st.st_mode)) load_die(ls, "cannot read %s '%s': it is a directory, not a file", what, path);
    FILE *f = fopen(path, "rb");
    if (!f) load_die(ls, "cannot read %s '%s': %s", what, path, strerror(errno));
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *text;
    HS_ALLOC(text, cap + 1);
    size_t got;
    while ((got = fread(text + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            HS_REALLOC(text, cap + 1);
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(text);
        load_die(ls, "cannot read %s '%s': read error", what, path);
    }
    text[n] = '\0';
    return text;
}

/* The name under which to report a source file: libconfig records an @include'd file by the name
 * written in the @include, so put the include directory in front of a relative one. */
static void display_name(const load_state *ls, const char *file, char *buf, size_t len) {
    if (!file) snprintf(buf, len, "%s", ls->origin);
    else if (ls->include_dir && file[0] != '/' && strcmp(file, ls->origin) != 0)
        snprintf(buf, len, "%s/%s", ls->include_dir, file);
    else snprintf(buf, len, "%s", file);
}

/* The first time a setting from an @include'd file is seen, scan that file for long literals. */
static void scan_source_file(load_state *ls, const config_setting_t *s) {
    char name[1024];
    if (!config_setting_source_file(s)) return;
    display_name(ls, config_setting_source_file(s), name, sizeof name);
    for (int i = 0; i < ls->n_scanned; i++)
        if (strcmp(ls->scanned[i], name) == 0) return;
    HS_REALLOC(ls->scanned, ls->n_scanned + 1);
    ls->scanned[ls->n_scanned++] = HS_STRDUP(name);
    ls->include_text = read_whole_file(ls, name, "included file");
    check_int_literals(ls, ls->include_text, name);
    free(ls->include_text);
    ls->include_text = NULL;
}

static void setting_where(load_state *ls, const config_setting_t *s, char *buf, size_t len) {
    char name[1024];
    scan_source_file(ls, s);
    display_name(ls, config_setting_source_file(s), name, sizeof name);
    snprintf(buf, len, "%s:%u", name, config_setting_source_line(s));
}

/* Every setting of the file must be a schema key of the right shape; store each one's value. */
static void walk_settings(load_state *ls) {
    const config_setting_t *root = config_root_setting(&ls->file_cfg);
    char where[1200], path[512];
    for (int i = 0; i < config_setting_length(root); i++) {
        const config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
        const char *name = config_setting_name(s);
        setting_where(ls, s, where, sizeof where);
        if (config_setting_is_group(s)) {
            if (!is_group(name)) {
                int k = schema_index(name);
                if (k >= 0) die_type(ls, where, &hs_cfg_schema[k], s, "");
                char near[64];
                const char *hint = suggest_group(name, near, sizeof near);
                if (hint)
                    load_die(ls, "%s: unknown group '%s'; did you mean '%s'? (every key is listed in "
                             "docs/configuration.md)", where, name, hint);
                load_die(ls, "%s: unknown group '%s' (every key is listed in docs/configuration.md)", where, name);
            }
            for (int j = 0; j < config_setting_length(s); j++) {
                const config_setting_t *m = config_setting_get_elem(s, (unsigned)j);
                setting_where(ls, m, where, sizeof where);
                snprintf(path, sizeof path, "%s.%s", name, config_setting_name(m));
                int k = schema_index(path);
                if (k < 0) die_unknown_key(ls, where, path);
                value_from_setting(ls, k, m, where);
            }
        } else {
            int k = schema_index(name);
            if (k >= 0) {
                value_from_setting(ls, k, s, where);
            } else if (is_group(name)) {
                load_die(ls, "%s: '%s' is a group of settings, not a value; write %s: { key = value; ... };", where,
                         name, name);
            } else {
                die_unknown_key(ls, where, name);
            }
        }
    }
}

/* One `-o group.key=value`. */
static void apply_override(load_state *ls, const char *ov) {
    size_t wlen = strlen(ov) + 4;
    HS_ALLOC(ls->where, wlen);
    snprintf(ls->where, wlen, "-o %s", ov);
    const char *where = ls->where;
    ls->override = HS_STRDUP(ov);
    char *eq = strchr(ls->override, '=');
    if (!eq) load_die(ls, "%s: expected group.key=value, e.g. -o optimizer.lr=0.01", where);
    *eq = '\0';
    char *path = trim(ls->override), *value = trim(eq + 1);
    if (*path == '\0') load_die(ls, "%s: expected group.key=value, e.g. -o optimizer.lr=0.01", where);
    int k = schema_index(path);
    if (k < 0) {
        if (is_group(path)) {
            const char *example = path;
            for (int j = 0; j < hs_cfg_schema_count && example == path; j++)
                if (group_len(hs_cfg_schema[j].path) == strlen(path) &&
                    strncmp(hs_cfg_schema[j].path, path, strlen(path)) == 0)
                    example = hs_cfg_schema[j].path;
            load_die(ls, "%s: '%s' is a group of settings; set one of its keys, e.g. -o %s=...", where, path, example);
        }
        die_unknown_key(ls, where, path);
    }
    ls->in_override = 1;
    value_from_override(ls, k, value, where);
    ls->in_override = 0;
    free(ls->override);
    ls->override = NULL;
    free(ls->where);
    ls->where = NULL;
}

/* Every key at its default. The defaults are libconfig literals, read in one libconfig text
 * ("d0 = 19940802;\nd1 = \"mnist\";\n...", setting k = key k) and checked like the file's values; a
 * default that fails is a bug in config_schema.c. */
static void config_with_defaults(load_state *ls) {
    HS_ALLOC(ls->c, 1);
    HS_ALLOC(ls->c->v, hs_cfg_schema_count);
    size_t len = 1;
    for (int k = 0; k < hs_cfg_schema_count; k++) {
        for (int j = 0; j < k; j++)
            if (strcmp(hs_cfg_schema[j].path, hs_cfg_schema[k].path) == 0)
                HS_FATAL("fix src/config_schema.c", "duplicate schema key %s", hs_cfg_schema[k].path);
        len += strlen(hs_cfg_schema[k].default_str) + 32;
    }
    HS_ALLOC(ls->value_text, len);
    size_t at = 0;
    for (int k = 0; k < hs_cfg_schema_count; k++)
        at += (size_t)snprintf(ls->value_text + at, len - at, "d%d = %s;\n", k, hs_cfg_schema[k].default_str);
    const char *pos = ls->value_text;
    int line = 1;
    long_literal l;
    if (next_long_literal(ls->value_text, &pos, &line, 0, &l))
        HS_FATAL("fix src/config_schema.c", "the default of %s needs an L suffix", hs_cfg_schema[line - 1].path);
    config_init(&ls->value_cfg);
    ls->value_cfg_live = 1;
    if (!config_read_string(&ls->value_cfg, ls->value_text) ||
        config_setting_length(config_root_setting(&ls->value_cfg)) != hs_cfg_schema_count)
        HS_FATAL("fix src/config_schema.c", "the default of %s is no libconfig literal: %s",
                 hs_cfg_schema[config_error_line(&ls->value_cfg) > 0 ? config_error_line(&ls->value_cfg) - 1 : 0].path,
                 config_error_text(&ls->value_cfg));
    const config_setting_t *root = config_root_setting(&ls->value_cfg);
    for (int k = 0; k < hs_cfg_schema_count; k++)
        value_from_setting(ls, k, config_setting_get_elem(root, (unsigned)k), "default");
    config_destroy(&ls->value_cfg);
    ls->value_cfg_live = 0;
    free(ls->value_text);
    ls->value_text = NULL;
}

_Noreturn static void config_failed(load_state *ls, const config_t *cfg) {
    char file[1024];
    display_name(ls, config_error_file(cfg), file, sizeof file);
    if (config_error_type(cfg) == CONFIG_ERR_FILE_IO)
        load_die(ls, "%s: cannot read the experiment file (or a file it @includes): %s", file, config_error_text(cfg));
    load_die(ls, "%s:%d: %s (check for a missing ';', '=', quote or closing brace at or just before this line)", file,
             config_error_line(cfg), config_error_text(cfg));
}

/* Parse `text` (already read; from `file` if not NULL), validate, apply overrides. */
static hs_config *load(load_state *ls, const char *text, const char *file, int n_overrides,
                       char *const *overrides) {
    config_with_defaults(ls);
    check_int_literals(ls, text, ls->origin);
    HS_ALLOC(ls->scanned, 1);
    ls->scanned[ls->n_scanned++] = HS_STRDUP(ls->origin);
    config_init(&ls->file_cfg);
    ls->file_cfg_live = 1;
    int ok;
    if (file) {
        /* @include "x.cfg" is relative to the experiment file's directory */
        ls->dir = HS_STRDUP(file);
        char *slash = strrchr(ls->dir, '/');
        if (slash) {
            slash[slash == ls->dir] = '\0';
            config_set_include_dir(&ls->file_cfg, ls->dir);
            ls->include_dir = ls->dir;
        }
        ok = config_read_file(&ls->file_cfg, file);
    } else {
        ok = config_read_string(&ls->file_cfg, text);
    }
    if (!ok) config_failed(ls, &ls->file_cfg);
    walk_settings(ls);
    for (int i = 0; i < n_overrides; i++) apply_override(ls, overrides[i]);
    hs_config *c = ls->c;
    ls->c = NULL;
    load_release(ls);
    return c;
}

hs_config *hs_config_load(const char *path, int n_overrides, char *const *overrides) {
    load_state ls = {.origin = path};
    ls.file_text = read_whole_file(&ls, path, "experiment file");
    return load(&ls, ls.file_text, path, n_overrides, overrides);
}

hs_config *hs_config_load_string(const char *text, const char *origin, int n_overrides, char *const *overrides) {
    load_state ls = {.origin = origin ? origin : "<string>"};
    return load(&ls, text, NULL, n_overrides, overrides);
}

void hs_config_free(hs_config *c) {
    if (!c) return;
    for (int k = 0; k < hs_cfg_schema_count; k++) value_clear(&c->v[k]);
    free(c->v);
    free(c);
}

/* ================================================================================================
 * Getters
 * ============================================================================================== */

static const hs_cfg_value *get(const hs_config *c, const char *path, hs_cfg_type want, const char *getter) {
    int k = schema_index(path);
    if (k < 0) HS_FATAL("add the key to src/config_schema.c or fix the caller", "%s(\"%s\"): no such key in the schema", getter, path);
    if (hs_cfg_schema[k].type != want)
        HS_FATAL("use the getter matching the schema type", "%s(\"%s\"): the key is %s", getter, path,
                 type_name(NULL, hs_cfg_schema[k].type));
    return &c->v[k];
}

int64_t hs_cfg_int(const hs_config *c, const char *path) { return get(c, path, HS_CFG_INT, "hs_cfg_int")->i; }

double hs_cfg_float(const hs_config *c, const char *path) { return get(c, path, HS_CFG_FLOAT, "hs_cfg_float")->f; }

int hs_cfg_bool(const hs_config *c, const char *path) { return get(c, path, HS_CFG_BOOL, "hs_cfg_bool")->b; }

const char *hs_cfg_string(const hs_config *c, const char *path) {
    return get(c, path, HS_CFG_STRING, "hs_cfg_string")->s;
}

int hs_cfg_list_len(const hs_config *c, const char *path) {
    int k = schema_index(path);
    if (k >= 0 && hs_cfg_schema[k].type == HS_CFG_INT_LIST) return get(c, path, HS_CFG_INT_LIST, "hs_cfg_list_len")->n;
    return get(c, path, HS_CFG_FLOAT_LIST, "hs_cfg_list_len")->n;
}

double hs_cfg_float_elem(const hs_config *c, const char *path, int i) {
    const hs_cfg_value *v = get(c, path, HS_CFG_FLOAT_LIST, "hs_cfg_float_elem");
    if (i < 0 || i >= v->n) HS_FATAL("check hs_cfg_list_len first", "%s has %d elements, asked for element %d", path, v->n, i);
    return v->flist[i];
}

int64_t hs_cfg_int_elem(const hs_config *c, const char *path, int i) {
    const hs_cfg_value *v = get(c, path, HS_CFG_INT_LIST, "hs_cfg_int_elem");
    if (i < 0 || i >= v->n) HS_FATAL("check hs_cfg_list_len first", "%s has %d elements, asked for element %d", path, v->n, i);
    return v->ilist[i];
}

const char *hs_cfg_origin(const hs_config *c, const char *path, char *buf, int buflen) {
    int k = schema_index(path);
    if (k < 0) HS_FATAL("fix the caller", "hs_cfg_origin(\"%s\"): no such key in the schema", path);
    snprintf(buf, (size_t)buflen, "%s", c->v[k].origin);
    return buf;
}

/* ================================================================================================
 * The effective configuration as libconfig text
 * ============================================================================================== */

typedef struct {
    char *s;
    size_t len, cap;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) HS_PRINTF(2, 3);
static void sb_printf(strbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) HS_FATAL(NULL, "vsnprintf failed");
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        HS_REALLOC(b->s, b->cap);
    }
}

/* A float literal that libconfig reads back as the same double: the shortest of %.15g..%.17g that
 * round-trips (0.1 stays "0.1"), plus ".0" if it would otherwise read as an integer. */
static void sb_float(strbuf *b, double x) {
    char num[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(num, sizeof num, "%.*g", digits, x);
        if (strtod(num, NULL) == x) break;
    }
    sb_printf(b, "%s%s", num, strpbrk(num, ".eE") ? "" : ".0");
}

/* An integer literal; beyond 32 bits libconfig 1.5 needs the L suffix. */
static void sb_int(strbuf *b, int64_t x) { sb_printf(b, "%lld%s", (long long)x, x > INT_MAX || x < INT_MIN ? "L" : ""); }

static void sb_string(strbuf *b, const char *s) {
    sb_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': sb_printf(b, "\\\""); break;
        case '\\': sb_printf(b, "\\\\"); break;
        case '\n': sb_printf(b, "\\n"); break;
        case '\t': sb_printf(b, "\\t"); break;
        case '\r': sb_printf(b, "\\r"); break;
        case '\f': sb_printf(b, "\\f"); break;
        default:
            if (*p < 0x20 || *p == 0x7f) sb_printf(b, "\\x%02x", *p);
            else sb_printf(b, "%c", *p);
        }
    }
    sb_printf(b, "\"");
}

static void sb_value(strbuf *b, const hs_cfg_key *key, const hs_cfg_value *v) {
    switch (key->type) {
    case HS_CFG_INT: sb_int(b, v->i); break;
    case HS_CFG_FLOAT: sb_float(b, v->f); break;
    case HS_CFG_BOOL: sb_printf(b, "%s", v->b ? "true" : "false"); break;
    case HS_CFG_STRING: sb_string(b, v->s); break;
    case HS_CFG_INT_LIST:
    case HS_CFG_FLOAT_LIST:
        sb_printf(b, "[");
        for (int e = 0; e < v->n; e++) {
            if (e) sb_printf(b, ", ");
            if (key->type == HS_CFG_INT_LIST) sb_int(b, v->ilist[e]);
            else sb_float(b, v->flist[e]);
        }
        sb_printf(b, "]");
        break;
    }
}

char *hs_config_to_string(const hs_config *c) {
    strbuf b = {0};
    sb_printf(&b, "# hetseq effective configuration (every key; defaults included)\n");
    for (int k = 0; k < hs_cfg_schema_count; k++) { /* top-level keys first */
        const hs_cfg_key *key = &hs_cfg_schema[k];
        if (group_len(key->path)) continue;
        sb_printf(&b, "%s = ", key->path);
        sb_value(&b, key, &c->v[k]);
        sb_printf(&b, ";\n");
    }
    for (int g = 0; g < hs_cfg_schema_count; g++) { /* then each group, in order of first appearance */
        size_t gl = group_len(hs_cfg_schema[g].path);
        if (!gl) continue;
        int first = 1;
        for (int j = 0; j < g && first; j++)
            first = !(group_len(hs_cfg_schema[j].path) == gl && strncmp(hs_cfg_schema[j].path, hs_cfg_schema[g].path, gl) == 0);
        if (!first) continue;
        sb_printf(&b, "\n%.*s: {\n", (int)gl, hs_cfg_schema[g].path);
        for (int k = g; k < hs_cfg_schema_count; k++) {
            const hs_cfg_key *key = &hs_cfg_schema[k];
            if (group_len(key->path) != gl || strncmp(key->path, hs_cfg_schema[g].path, gl) != 0) continue;
            sb_printf(&b, "  %s = ", key->path + gl + 1);
            sb_value(&b, key, &c->v[k]);
            sb_printf(&b, ";\n");
        }
        sb_printf(&b, "};\n");
    }
    return b.s;
}
