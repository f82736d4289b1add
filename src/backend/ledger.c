/* The device-operation ledger (ledger.h): rows by name, the allocation sizes behind the peak, the
 * per-op table. */
#include <stdlib.h>
#include <string.h>

#include "backend/ledger.h"
#include "util/check.h"

hs_ledger hs_ledger_state;
static hs_ledger marked; /* the counts at hs_ledger_mark (zeros without one, or after a reset) */
hs_ledger_tape *hs_ledger_taping;
static _Thread_local int taping_thread;

void hs_ledger_tape_start(hs_ledger_tape *t) {
    taping_thread = 1;
    hs_ledger_taping = t;
}

void hs_ledger_tape_stop(void) {
    hs_ledger_taping = NULL;
    taping_thread = 0;
}

void hs_ledger_tape_add(hs_ledger_tape *t, int slot, uint64_t bytes) {
    if (!taping_thread) return;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        HS_REALLOC(t->slot, t->cap);
        HS_REALLOC(t->bytes, t->cap);
    }
    t->slot[t->n] = slot;
    t->bytes[t->n++] = bytes;
}

void hs_ledger_tape_replay(const hs_ledger_tape *t) {
    for (size_t i = 0; i < t->n; i++) hs_ledger_count(t->slot[i], t->bytes[i]);
}

void hs_ledger_tape_free(hs_ledger_tape *t) {
    free(t->slot);
    free(t->bytes);
    memset(t, 0, sizeof *t);
}

int hs_ledger_slot(const char *name, int kind) {
    hs_ledger *l = &hs_ledger_state;
    l->used = 1;
    for (int i = 0; i < l->rows; i++)
        if (!strcmp(l->row[i].name, name)) return i;
    if (l->rows == HS_LEDGER_MAX_ROWS) {
        /* the last row becomes the catch-all */
        l->row[HS_LEDGER_MAX_ROWS - 1].name = "(other)";
        return HS_LEDGER_MAX_ROWS - 1;
    }
    l->row[l->rows].name = name;
    l->row[l->rows].kind = kind;
    return l->rows++;
}

void hs_ledger_counting(int on) { hs_ledger_state.counting = on; }
void hs_ledger_update_begin(void) { hs_ledger_state.counting = 1; }
void hs_ledger_update_end(void) {
    hs_ledger_state.counting = 0;
    hs_ledger_state.updates++;
}

static void forget_table(const void *p);

/* ---- allocation sizes: open addressing on the pointer, linear probing, deletion by backward shift ---- */
typedef struct alloc_entry {
    const void *p; /* NULL: empty */
    size_t bytes;
} alloc_entry;

static alloc_entry *table;
static size_t table_cap, table_used; /* cap a power of two, used < cap / 2 */

static size_t home(const void *p, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15); /* Fibonacci hashing */
    return (size_t)(h >> 32) & (cap - 1);
}

static void put(const void *p, size_t bytes) {
    size_t i = home(p, table_cap);
    while (table[i].p && table[i].p != p) i = (i + 1) & (table_cap - 1);
    if (!table[i].p) table_used++;
    table[i].p = p;
    table[i].bytes = bytes;
}

static void grow(void) {
    alloc_entry *old = table;
    size_t old_cap = table_cap;
    table_cap = table_cap ? table_cap * 2 : 256;
    HS_ALLOC(table, table_cap);
    table_used = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].p) put(old[i].p, old[i].bytes);
    free(old);
}

void hs_ledger_alloc(const void *p, size_t bytes) {
    if (!p) return;
    hs_ledger *l = &hs_ledger_state;
    l->used = 1;
    if ((table_used + 1) * 2 > table_cap) grow();
    put(p, bytes);
    l->live_bytes += bytes;
    if (l->live_bytes > l->peak_bytes) l->peak_bytes = l->live_bytes;
}

void hs_ledger_free(const void *p) {
    if (!p) return;
    forget_table(p);
    if (!table_cap) return;
    size_t i = home(p, table_cap);
    while (table[i].p && table[i].p != p) i = (i + 1) & (table_cap - 1);
    if (!table[i].p) return; /* not recorded (allocated before the ledger knew it) */
    hs_ledger_state.live_bytes -= table[i].bytes;
    table[i].p = NULL;
    table_used--;
    /* backward shift: move up every later entry of the run that may sit past its home */
    size_t hole = i;
    for (size_t j = (i + 1) & (table_cap - 1); table[j].p; j = (j + 1) & (table_cap - 1)) {
        size_t h = home(table[j].p, table_cap);
        /* entry j may fill the hole if its home is not in (hole, j] (cyclically) */
        int in_between = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
        if (!in_between) {
            table[hole] = table[j];
            table[j].p = NULL;
            hole = j;
        }
    }
}

/* ---- tensor tables: few (the parameters, a scratch span or two), so a short list ---- */
#define MAX_TABLES 64
static struct {
    const void *table;
    uint64_t elements;
} tables[MAX_TABLES];
static int n_tables;

void hs_ledger_table(const void *table, uint64_t elements) {
    for (int i = 0; i < n_tables; i++)
        if (tables[i].table == table) {
            tables[i].elements = elements;
            return;
        }
    if (n_tables == MAX_TABLES) return; /* not recorded: its ops count without bytes */
    tables[n_tables].table = table;
    tables[n_tables].elements = elements;
    n_tables++;
}

uint64_t hs_ledger_table_bytes(const void *table, uint64_t bytes_per_element, uint64_t extra) {
    for (int i = 0; i < n_tables; i++)
        if (tables[i].table == table) return tables[i].elements * bytes_per_element + extra;
    return HS_LEDGER_UNSIZED;
}

static void forget_table(const void *p) {
    for (int i = 0; i < n_tables; i++)
        if (tables[i].table == p) {
            tables[i] = tables[--n_tables];
            return;
        }
}

void hs_ledger_reset(void) {
    memset(&marked, 0, sizeof marked);
    hs_ledger *l = &hs_ledger_state;
    for (int i = 0; i < l->rows; i++) {
        l->row[i].calls = 0;
        l->row[i].bytes = 0;
        l->row[i].unsized = 0;
    }
    l->ops = 0;
    l->bytes = 0;
    l->updates = 0;
    l->peak_bytes = l->live_bytes;
}

const hs_ledger_row *hs_ledger_find(const char *name) {
    const hs_ledger *l = &hs_ledger_state;
    for (int i = 0; i < l->rows; i++)
        if (!strcmp(l->row[i].name, name)) return l->row[i].calls ? &l->row[i] : NULL;
    return NULL;
}

static int by_calls(const void *a, const void *b) {
    const hs_ledger_row *x = *(const hs_ledger_row *const *)a, *y = *(const hs_ledger_row *const *)b;
    if (x->calls != y->calls) return x->calls < y->calls ? 1 : -1;
    return strcmp(x->name, y->name);
}

void hs_ledger_mark(void) { marked = hs_ledger_state; }

static void print_table(FILE *out, const hs_ledger *l, int64_t updates, int64_t left_out);

void hs_ledger_print(FILE *out, int64_t updates) { print_table(out, &hs_ledger_state, updates, 0); }

void hs_ledger_print_since_mark(FILE *out) {
    hs_ledger since = hs_ledger_state;
    since.ops -= marked.ops;
    since.bytes -= marked.bytes;
    for (int i = 0; i < marked.rows; i++) { /* rows only grow: row i is the same op in both */
        since.row[i].calls -= marked.row[i].calls;
        since.row[i].bytes -= marked.row[i].bytes;
        since.row[i].unsized -= marked.row[i].unsized;
    }
    print_table(out, &since, since.updates - marked.updates, marked.updates);
}

static void print_table(FILE *out, const hs_ledger *l, int64_t updates, int64_t left_out) {
    static const char *const kinds[] = {"kernel", "library", "copy"};
    const hs_ledger_row *sorted[HS_LEDGER_MAX_ROWS];
    int n = 0;
    for (int i = 0; i < l->rows; i++)
        if (l->row[i].calls) sorted[n++] = &l->row[i];
    qsort(sorted, (size_t)n, sizeof *sorted, by_calls);
    const double u = updates > 0 ? (double)updates : 1.0;
    char after[64] = "";
    if (left_out > 0) snprintf(after, sizeof after, " after the first %lld", (long long)left_out);
    fprintf(out, "| device-op ledger over %lld update(s)%s: %llu device ops (%.1f per update), %.4g GB moved by hetseq's "
                 "kernels and copies (%.4g GB per update), peak device memory %.4g GB\n",
            (long long)updates, after, (unsigned long long)l->ops, (double)l->ops / u, (double)l->bytes / 1e9,
            (double)l->bytes / 1e9 / u, (double)l->peak_bytes / 1e9);
    fprintf(out, "| %-48s %-8s %12s %12s %14s %14s\n", "op", "kind", "calls", "per update", "bytes", "bytes/update");
    for (int i = 0; i < n; i++) {
        const hs_ledger_row *r = sorted[i];
        char bytes[32], per[32];
        if (r->kind == HS_LEDGER_LIBRARY) {
            snprintf(bytes, sizeof bytes, "-");
            snprintf(per, sizeof per, "-");
        } else {
            snprintf(bytes, sizeof bytes, "%llu%s", (unsigned long long)r->bytes, r->unsized ? "+?" : "");
            snprintf(per, sizeof per, "%.4g%s", (double)r->bytes / u, r->unsized ? "+?" : "");
        }
        fprintf(out, "| %-48s %-8s %12llu %12.2f %14s %14s\n", r->name, kinds[r->kind], (unsigned long long)r->calls,
                (double)r->calls / u, bytes, per);
    }
    int unsized = 0;
    for (int i = 0; i < n; i++) unsized += sorted[i]->unsized > 0;
    if (unsized)
        fprintf(out, "| %d kernel(s) marked +? were launched without a byte count: give it to HS_CUDA_LAUNCHED, or "
                     "record the tensor table with hs_ledger_table (docs/gpu.md, \"The device-operation ledger\")\n",
                unsized);
    fflush(out);
}
