/* Grow-only device scratch buffers. */
#include "nn/layers.h"

void hs_workspace_reserve(const hs_backend *be, hs_workspace *ws, size_t bytes) {
    if (ws->ptr && ws->bytes >= bytes) return;
    if (ws->ptr) be->free(be, ws->ptr);
    ws->ptr = be->alloc(be, bytes);
    ws->bytes = bytes;
}

void hs_workspace_release(const hs_backend *be, hs_workspace *ws) {
    if (ws->ptr) be->free(be, ws->ptr);
    ws->ptr = NULL;
    ws->bytes = 0;
}
