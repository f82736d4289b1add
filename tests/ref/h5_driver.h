/* HDF5 helpers of the PyTorch cross-check drivers (bert_ref_grads.c, txl_ref_grads.c): the Python test
 * writes the weights under /model/<PyTorch name>; the driver writes its losses and gradients back. */
#ifndef HS_TESTS_REF_H5_DRIVER_H
#define HS_TESTS_REF_H5_DRIVER_H

#include <hdf5.h>

#include "nn/params.h"

/* Upload /model/<name of tensor t> of file into the table's tensor t (a message if missing or mis-sized). */
void h5_driver_read_param(hid_t file, const hs_params *p, int t);
/* loc/name = src (ndim 0: a scalar) */
void h5_driver_write_dataset(hid_t loc, const char *name, hid_t type, const void *src, int ndim, const hsize_t *dims);
void h5_driver_write_scalar(hid_t loc, const char *name, double v);

#endif
