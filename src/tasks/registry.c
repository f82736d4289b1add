/* The task registry: maps the config's `task` name to a constructor. To add a task, write
 * src/tasks/<name>_task.c with a constructor of this shape and add a row below
 * (docs/adding-a-task.md). */
#include <string.h>

#include "tasks/task.h"
#include "util/check.h"

hs_task *hs_mnist_task_create(const hs_config *cfg, const hs_comm *comm, const hs_backend *be);
hs_task *hs_bert_task_create(const hs_config *cfg, const hs_comm *comm, const hs_backend *be);

typedef struct {
    const char *name;
    hs_task *(*create)(const hs_config *cfg, const hs_comm *comm, const hs_backend *be);
    const char *status; /* NULL when available */
} hs_task_entry;

static const hs_task_entry registry[] = {
    {"mnist", hs_mnist_task_create, NULL},
    {"bert", hs_bert_task_create, NULL},
    {"txl", NULL, "Transformer-XL is not in this release yet"},
};

hs_task *hs_task_create(const hs_config *cfg, const hs_comm *comm, const hs_backend *be) {
    const char *name = hs_cfg_string(cfg, "task");
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
        if (strcmp(registry[i].name, name) != 0) continue;
        if (!registry[i].create) hs_die_all("task = \"%s\": %s. Use task = \"mnist\" or \"bert\".", name, registry[i].status);
        return registry[i].create(cfg, comm, be);
    }
    hs_die_all("task = \"%s\" is not a known task (known: mnist, bert, txl)", name);
}

void hs_task_destroy(hs_task *t) {
    if (t && t->destroy) t->destroy(t);
}
