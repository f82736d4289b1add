/* File and parameter-table plumbing shared by the optimizer reference drivers (optim_driver.c,
 * lamb_driver.c): the Python tests hand them packed float arrays and read packed arrays back, while
 * the optimizer works on hs_params' padded device layout. */
#ifndef HS_TESTS_DRIVER_UTIL_H
#define HS_TESTS_DRIVER_UTIL_H

#include <stddef.h>
#include <stdio.h>

#include "nn/params.h"

/* The driver's name for its messages; each driver defines it. */
extern const char driver_name[];

/* fopen, or exit 2 with the path and the reason */
FILE *driver_open(const char *path, const char *mode);

/* Exactly `bytes` from / to f, or exit 2 ("input file too short" / the write error). */
void driver_read(FILE *f, void *buf, size_t bytes);
void driver_write(FILE *f, const void *buf, size_t bytes);

/* fclose of an output file, or exit 2 */
void driver_close_output(FILE *f);

/* Copy a packed host vector packed[sum of numel] into (or out of) the padded device layout dev[total]. */
void driver_upload_packed(hs_params *p, float *dev, const float *packed);
void driver_download_packed(hs_params *p, float *packed, const float *dev);

/* dev[total] written to f packed, through the scratch host[n] (n = sum of numel) */
void driver_write_packed(FILE *f, hs_params *p, float *host, const float *dev, size_t n);

/* The input's head: float64 lr[steps] (returned, caller frees), then float32 p0[n] uploaded into
 * p->data through `host[n]`. */
double *driver_read_lrs_and_params(FILE *in, int steps, hs_params *p, float *host, size_t n);

/* The padding floats of dev[total] (between tensors and after the last): set them all to `value`, or
 * count those that differ from `value` (an update that wrote outside its tensor changes one). */
void driver_fill_padding(hs_params *p, float *dev, float value);
size_t driver_padding_changed(hs_params *p, float *dev, float value);

#endif
