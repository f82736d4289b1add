/* Helper of test_rel_attention_vs_torch.py: runs hetseq's relative-position attention (the layer
 * wrappers of src/nn/layers.h) once forward and once backward on inputs read from an HDF5 file and
 * writes the outputs to a second one.
 *   usage: rel_attention_driver IN.h5 OUT.h5
 *   IN:  /dims int32 [6] = batch, qlen, mlen, heads, head_dim, lower_shift; /scale, /p float64 scalars;
 *        /key int64 scalar; float32 /qkv [b,klen,3·n·d], /r [klen,n·d], /r_w_bias, /r_r_bias [n,d],
 *        /dctx [b,qlen,n·d] (the gradient fed to the backward pass)
 *   OUT: float32 /ctx, /probs [b,n,qlen,klen] (a dropped probability negated), /dqkv, /dr, /dr_w_bias,
 *        /dr_r_bias (the bias gradients accumulate onto zeros)
 * HS_TEST_DEVICE=cuda runs it on the CUDA backend instead of the CPU. */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "nn/layers.h"
#include "util/check.h"

static const char input_hint[] = "is the input written by test_rel_attention_vs_torch.py?";

/* dst[expect] from dataset `path`, converted to `type`; exits when the size differs */
static void read_dataset(hid_t file, const char *path, hid_t type, void *dst, hssize_t expect) {
    hid_t d = (hid_t)HS_H5(H5Dopen2(file, path, H5P_DEFAULT), input_hint);
    hid_t sp = (hid_t)HS_H5(H5Dget_space(d), NULL);
    const hssize_t n = H5Sget_simple_extent_npoints(sp);
    HS_H5(n, NULL);
    if (n != expect) hs_die("%s: %lld values, expected %lld (%s)", path, (long long)n, (long long)expect, input_hint);
    HS_H5(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst), NULL);
    HS_H5(H5Sclose(sp), NULL);
    HS_H5(H5Dclose(d), NULL);
}

static void write_floats(hid_t file, const char *name, const float *src, hsize_t n) {
    hid_t sp = (hid_t)HS_H5(H5Screate_simple(1, &n, NULL), NULL);
    hid_t d = (hid_t)HS_H5(H5Dcreate2(file, name, H5T_NATIVE_FLOAT, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
    HS_H5(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, src), NULL);
    HS_H5(H5Dclose(d), NULL);
    HS_H5(H5Sclose(sp), NULL);
}

/* A device copy of dataset `path` [n] (n = 0: n zeros, not read) */
static float *device_input(const hs_backend *be, hid_t in, const char *path, size_t n) {
    float *host, *dev = be->alloc(be, n * sizeof(float));
    HS_ALLOC(host, n);
    if (path) read_dataset(in, path, H5T_NATIVE_FLOAT, host, (hssize_t)n);
    be->upload(be, dev, host, n * sizeof(float));
    free(host);
    return dev;
}

static void write_output(const hs_backend *be, hid_t out, const char *name, const float *dev, size_t n) {
    float *host;
    HS_ALLOC(host, n);
    be->download(be, host, dev, n * sizeof(float));
    write_floats(out, name, host, (hsize_t)n);
    free(host);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN.h5 OUT.h5\n", argv[0]);
        return 2;
    }
    const char *device = getenv("HS_TEST_DEVICE");
    const hs_backend *be = hs_backend_select(device && *device ? device : "cpu", 0);
    hid_t in = (hid_t)HS_H5(H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open the input file");
    int32_t dims[6];
    double scale, p;
    int64_t key;
    read_dataset(in, "/dims", H5T_NATIVE_INT32, dims, 6);
    read_dataset(in, "/scale", H5T_NATIVE_DOUBLE, &scale, 1);
    read_dataset(in, "/p", H5T_NATIVE_DOUBLE, &p, 1);
    read_dataset(in, "/key", H5T_NATIVE_INT64, &key, 1);
    const int batch = dims[0], qlen = dims[1], mlen = dims[2], heads = dims[3], head_dim = dims[4],
              lower_shift = dims[5];
    if (batch < 1 || qlen < 1 || mlen < 0 || heads < 1 || head_dim < 1 || lower_shift < 0)
        hs_die("%s: /dims %d %d %d %d %d %d are not valid sizes", argv[1], batch, qlen, mlen, heads, head_dim,
               lower_shift);
    const int klen = mlen + qlen, H = heads * head_dim;
    const size_t n_qkv = (size_t)batch * klen * 3 * H, n_r = (size_t)klen * H, n_bias = (size_t)H,
                 n_ctx = (size_t)batch * qlen * H, n_probs = (size_t)batch * heads * qlen * klen;
    float *qkv = device_input(be, in, "/qkv", n_qkv), *r = device_input(be, in, "/r", n_r);
    float *rwb = device_input(be, in, "/r_w_bias", n_bias), *rrb = device_input(be, in, "/r_r_bias", n_bias);
    float *dctx = device_input(be, in, "/dctx", n_ctx);
    HS_H5(H5Fclose(in), NULL);
    float *ctx = device_input(be, in, NULL, n_ctx), *probs = device_input(be, in, NULL, n_probs);
    float *dqkv = device_input(be, in, NULL, n_qkv), *dr = device_input(be, in, NULL, n_r);
    float *dwb = device_input(be, in, NULL, n_bias), *drb = device_input(be, in, NULL, n_bias);

    hs_rel_attention_forward(be, ctx, probs, qkv, r, rwb, rrb, batch, qlen, mlen, heads, head_dim, lower_shift,
                             (float)scale, (float)p, (uint64_t)key, 0);
    hs_rel_attention_backward(be, dqkv, dr, dwb, drb, dctx, qkv, r, rwb, rrb, probs, batch, qlen, mlen, heads,
                              head_dim, lower_shift, (float)scale, (float)p, (uint64_t)key, 0);

    hid_t out = (hid_t)HS_H5(H5Fcreate(argv[2], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create the output");
    write_output(be, out, "ctx", ctx, n_ctx);
    write_output(be, out, "probs", probs, n_probs);
    write_output(be, out, "dqkv", dqkv, n_qkv);
    write_output(be, out, "dr", dr, n_r);
    write_output(be, out, "dr_w_bias", dwb, n_bias);
    write_output(be, out, "dr_r_bias", drb, n_bias);
    HS_H5(H5Fclose(out), NULL);
    float *all[] = {qkv, r, rwb, rrb, dctx, ctx, probs, dqkv, dr, dwb, drb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) be->free(be, all[i]);
    return 0;
}
