/* The task-state arrays a checkpoint carries for exact resume (tasks/task.h). */
#include <stdlib.h>
#include <string.h>

#include "tasks/task.h"

void hs_task_state_free(hs_task_state *s) {
    if (!s) return;
    for (int i = 0; i < s->count; i++) free(s->arrays[i].data);
    memset(s, 0, sizeof *s);
}
