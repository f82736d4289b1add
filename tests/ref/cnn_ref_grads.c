/* Helper of test_cnn_vs_torch.py: reads the MNIST CNN's parameters (PyTorch names) and one batch from
 * an HDF5 file, runs one forward/backward with dropout off, and writes the summed NLL loss, the number
 * of correct predictions and every parameter's gradient to a second HDF5 file.
 *   usage: cnn_ref_grads IN.h5 OUT.h5
 *   IN:  /x float32 [B,1,28,28], /labels int32 [B], /params/<name> float32 (e.g. /params/conv1.weight)
 *   OUT: /loss float64 (sum over the batch), /correct float64, /grad/<name> float32 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "models/cnn.h"
#include "nn/params.h"
#include "util/check.h"

static hsize_t dataset_numel(hid_t file, const char *path) {
    hid_t d = (hid_t)HS_H5(H5Dopen2(file, path, H5P_DEFAULT), "is the input written by test_cnn_vs_torch.py?");
    hid_t sp = (hid_t)HS_H5(H5Dget_space(d), NULL);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    HS_H5(n, NULL);
    HS_H5(H5Sclose(sp), NULL);
    HS_H5(H5Dclose(d), NULL);
    return (hsize_t)n;
}

static void read_dataset(hid_t file, const char *path, hid_t type, void *dst, hsize_t expect) {
    if (dataset_numel(file, path) != expect)
        hs_die("%s holds %llu values, expected %llu", path, (unsigned long long)dataset_numel(file, path),
               (unsigned long long)expect);
    hid_t d = (hid_t)HS_H5(H5Dopen2(file, path, H5P_DEFAULT), NULL);
    HS_H5(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst), NULL);
    HS_H5(H5Dclose(d), NULL);
}

static void write_dataset(hid_t loc, const char *name, hid_t type, const void *src, int ndim, const hsize_t *dims) {
    hid_t sp = (hid_t)HS_H5(ndim ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR), NULL);
    hid_t d = (hid_t)HS_H5(H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
    HS_H5(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, src), NULL);
    HS_H5(H5Dclose(d), NULL);
    HS_H5(H5Sclose(sp), NULL);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN.h5 OUT.h5\n", argv[0]);
        return 2;
    }
    /* HS_TEST_DEVICE=cuda: the same check on the CUDA backend (tests/cuda/test_torch_on_cuda.sh) */
    const char *device = getenv("HS_TEST_DEVICE");
    const hs_backend *be = hs_backend_select(device && *device ? device : "cpu", 0);
    hid_t in = (hid_t)HS_H5(H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open the input file");
    const int batch = (int)dataset_numel(in, "/labels");

    hs_params params = {0};
    hs_cnn *model = hs_cnn_create(&params, batch, 0.25f, 0.5f);
    hs_params_allocate(&params, be);
    hs_cnn_setup(model);
    for (int t = 0; t < params.count; t++) {
        char path[HS_NAME_MAX + 16];
        snprintf(path, sizeof path, "/params/%s", params.tensors[t].name);
        float *host = malloc(params.tensors[t].numel * sizeof *host);
        if (!host) HS_FATAL(NULL, "out of memory");
        read_dataset(in, path, H5T_NATIVE_FLOAT, host, params.tensors[t].numel);
        be->upload(be, hs_param_data(&params, t), host, params.tensors[t].numel * sizeof *host);
        free(host);
    }
    const size_t nx = (size_t)batch * 28 * 28;
    float *x_host = malloc(nx * sizeof *x_host);
    int32_t *labels_host = malloc((size_t)batch * sizeof *labels_host);
    if (!x_host || !labels_host) HS_FATAL(NULL, "out of memory");
    read_dataset(in, "/x", H5T_NATIVE_FLOAT, x_host, nx);
    read_dataset(in, "/labels", H5T_NATIVE_INT32, labels_host, (hsize_t)batch);
    HS_H5(H5Fclose(in), NULL);

    float *x = be->alloc(be, nx * sizeof *x);
    int32_t *labels = be->alloc(be, (size_t)batch * sizeof *labels);
    be->upload(be, x, x_host, nx * sizeof *x);
    be->upload(be, labels, labels_host, (size_t)batch * sizeof *labels);

    hs_params_zero_grad(&params);
    const hs_step_ctx ctx = {.seed = 1, .update = 0, .training = 0, .loss_scale = {1.0, 0.0}}; /* dropout off, gradient of the NLL sum */
    double *stats_dev = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double)); /* zero-filled */
    hs_cnn_forward_backward(model, x, labels, batch, 0, &ctx, stats_dev);
    hs_stats stats;
    be->download(be, &stats, stats_dev, sizeof stats);
    be->free(be, stats_dev);

    hid_t out = (hid_t)HS_H5(H5Fcreate(argv[2], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create the output");
    write_dataset(out, "loss", H5T_NATIVE_DOUBLE, &stats.loss_sum, 0, NULL);
    write_dataset(out, "correct", H5T_NATIVE_DOUBLE, &stats.correct, 0, NULL);
    hid_t grad = (hid_t)HS_H5(H5Gcreate2(out, "grad", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
    for (int t = 0; t < params.count; t++) {
        const hs_tensor_info *ti = &params.tensors[t];
        float *host = malloc(ti->numel * sizeof *host);
        if (!host) HS_FATAL(NULL, "out of memory");
        be->download(be, host, hs_param_grad(&params, t), ti->numel * sizeof *host);
        hsize_t dims[HS_MAX_DIMS];
        for (int d = 0; d < ti->ndim; d++) dims[d] = (hsize_t)ti->shape[d];
        write_dataset(grad, ti->name, H5T_NATIVE_FLOAT, host, ti->ndim, dims);
        free(host);
    }
    HS_H5(H5Gclose(grad), NULL);
    HS_H5(H5Fclose(out), NULL);

    be->free(be, x), be->free(be, labels);
    free(x_host), free(labels_host);
    hs_cnn_free(model);
    hs_params_free(&params);
    return 0;
}
