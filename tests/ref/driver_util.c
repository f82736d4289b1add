/* File and parameter-table plumbing shared by the optimizer reference drivers (see driver_util.h). */
#include "driver_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

FILE *driver_open(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) {
        perror(path);
        exit(2);
    }
    return f;
}

void driver_read(FILE *f, void *buf, size_t bytes) {
    if (fread(buf, 1, bytes, f) != bytes) {
        fprintf(stderr, "%s: input file too short\n", driver_name);
        exit(2);
    }
}

void driver_write(FILE *f, const void *buf, size_t bytes) {
    if (fwrite(buf, 1, bytes, f) != bytes) {
        fprintf(stderr, "%s: write: %s\n", driver_name, strerror(errno));
        exit(2);
    }
}

void driver_close_output(FILE *f) {
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: close: %s\n", driver_name, strerror(errno));
        exit(2);
    }
}

void driver_upload_packed(hs_params *p, float *dev, const float *packed) {
    size_t at = 0;
    for (int i = 0; i < p->count; i++) {
        p->be->upload(p->be, dev + p->tensors[i].offset, packed + at, p->tensors[i].numel * sizeof(float));
        at += p->tensors[i].numel;
    }
}

void driver_download_packed(hs_params *p, float *packed, const float *dev) {
    size_t at = 0;
    for (int i = 0; i < p->count; i++) {
        p->be->download(p->be, packed + at, dev + p->tensors[i].offset, p->tensors[i].numel * sizeof(float));
        at += p->tensors[i].numel;
    }
}

void driver_write_packed(FILE *f, hs_params *p, float *host, const float *dev, size_t n) {
    driver_download_packed(p, host, dev);
    driver_write(f, host, n * sizeof(float));
}

double *driver_read_lrs_and_params(FILE *in, int steps, hs_params *p, float *host, size_t n) {
    double *lrs;
    HS_ALLOC(lrs, steps);
    driver_read(in, lrs, (size_t)steps * sizeof(double));
    driver_read(in, host, n * sizeof(float));
    driver_upload_packed(p, p->data, host);
    return lrs;
}

/* set != 0: write `value` into every padding float; else count the padding floats != value. */
static size_t padding_pass(hs_params *p, float *dev, float value, int set) {
    float *host;
    HS_ALLOC(host, p->total);
    p->be->download(p->be, host, dev, p->total * sizeof(float));
    size_t changed = 0, next = 0;
    for (int i = 0; i <= p->count; i++) {
        size_t start = i < p->count ? p->tensors[i].offset : p->total;
        for (size_t j = next; j < start; j++) {
            if (set) host[j] = value;
            else changed += host[j] != value;
        }
        if (i < p->count) next = p->tensors[i].offset + p->tensors[i].numel;
    }
    if (set) p->be->upload(p->be, dev, host, p->total * sizeof(float));
    free(host);
    return changed;
}

void driver_fill_padding(hs_params *p, float *dev, float value) { padding_pass(p, dev, value, 1); }

size_t driver_padding_changed(hs_params *p, float *dev, float value) { return padding_pass(p, dev, value, 0); }
