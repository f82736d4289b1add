#include "h5_driver.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/check.h"

void h5_driver_read_param(hid_t file, const hs_params *p, int t) {
    const hs_tensor_info *ti = &p->tensors[t];
    char path[HS_NAME_MAX + 16];
    snprintf(path, sizeof path, "/model/%s", ti->name);
    if (H5Lexists(file, "/model", H5P_DEFAULT) <= 0 || H5Lexists(file, path, H5P_DEFAULT) <= 0)
        hs_die("the weights file has no dataset %s", path);
    hid_t d = (hid_t)HS_H5(H5Dopen2(file, path, H5P_DEFAULT), NULL);
    hid_t sp = (hid_t)HS_H5(H5Dget_space(d), NULL);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    if (n < 0 || (size_t)n != ti->numel) hs_die("%s holds %lld values, the model's tensor %zu", path, (long long)n, ti->numel);
    float *host;
    HS_ALLOC(host, ti->numel);
    HS_H5(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, host), NULL);
    p->be->upload(p->be, hs_param_data(p, t), host, ti->numel * sizeof *host);
    free(host);
    HS_H5(H5Sclose(sp), NULL);
    HS_H5(H5Dclose(d), NULL);
}

void h5_driver_write_dataset(hid_t loc, const char *name, hid_t type, const void *src, int ndim, const hsize_t *dims) {
    hid_t sp = (hid_t)HS_H5(ndim ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR), NULL);
    hid_t d = (hid_t)HS_H5(H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
    HS_H5(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, src), NULL);
    HS_H5(H5Dclose(d), NULL);
    HS_H5(H5Sclose(sp), NULL);
}

void h5_driver_write_scalar(hid_t loc, const char *name, double v) { h5_driver_write_dataset(loc, name, H5T_NATIVE_DOUBLE, &v, 0, NULL); }
