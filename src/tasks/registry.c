/* The task registry: maps the config's `task` name to a constructor. To add a task, write
 * src/tasks/<name>_task.c with a constructor of this shape and add a row below
 * (docs/adding-a-task.md). */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "tasks/task.h"
#include "util/check.h"

hs_task *hs_mnist_task_create(const hs_config *cfg, const hs_comm *comm, const hs_backend *be);
hs_task *hs_bert_task_create(const hs_config *cfg, const hs_comm *comm, const hs_backend *be);
hs_task *hs_txl_task_create(const hs_config *cfg, const hs_comm *comm, const hs_backend *be);

typedef struct {
    const char *name;
    hs_task *(*create)(const hs_config *cfg, const hs_comm *comm, const hs_backend *be);
} hs_task_entry;

static const hs_task_entry registry[] = {
    {"mnist", hs_mnist_task_create},
    {"bert", hs_bert_task_create},
    {"txl", hs_txl_task_create},
};

#define N_TASKS (sizeof registry / sizeof registry[0])

/* "mnist, bert, txl" from the table, built once (the message and docs list what the table holds). */
const char *hs_task_names(void) {
    static char names[256];
    if (!names[0]) {
        size_t off = 0;
        for (size_t i = 0; i < N_TASKS; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "", registry[i].name);
    }
    return names;
}

/* The schema lists the allowed values of `task` for early, typo-suggesting validation (a constant
 * initialiser cannot call into the registry); it must name exactly the registered tasks. */
static void check_schema_choices(void) {
    const hs_cfg_key *key = hs_cfg_schema_find("task");
    char expect[256];
    size_t off = 0;
    for (size_t i = 0; i < N_TASKS; i++)
        off += (size_t)snprintf(expect + off, sizeof expect - off, "%s%s", i ? "|" : "", registry[i].name);
    if (!key || !key->choices || strcmp(key->choices, expect) != 0)
        HS_FATAL(NULL, "src/config_schema.c lists the tasks \"%s\" but the registry holds \"%s\"",
                 key && key->choices ? key->choices : "(none)", expect);
}

hs_task *hs_task_create(const hs_config *cfg, const hs_comm *comm, const hs_backend *be) {
    check_schema_choices();
    const char *name = hs_cfg_string(cfg, "task");
    for (size_t i = 0; i < N_TASKS; i++) {
        if (strcmp(registry[i].name, name) != 0) continue;
        return registry[i].create(cfg, comm, be);
    }
    hs_die_all("task = \"%s\" is not a known task (known: %s)", name, hs_task_names());
}

void hs_task_destroy(hs_task *t) {
    if (t && t->destroy) t->destroy(t);
}
