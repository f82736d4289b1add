/* Helper of test_txl_vs_torch.py: builds hetseq's Transformer-XL from an experiment file (txl.* keys,
 * txl.n_token given), loads its weights by their PyTorch names, and runs consecutive segments of one
 * micro-batch through the model with the segment memory carried from one to the next, as training
 * (forward + backward, gradients zeroed before each segment, loss normalised as the trainer does:
 * loss_scale = 1 / tokens of the segment) or as evaluation (forward only, with the eval_* settings).
 *   usage: txl_ref_grads train|eval CONFIG.cfg WEIGHTS.h5 TOKENS.h5 OUT.h5 [SEED UPDATE FIRST]
 *   WEIGHTS: /model/<name> float32 for every parameter of the table (extra datasets are ignored)
 *   TOKENS:  /tokens int32 [segments, b, qlen + 1]: segment k's inputs [.., 0:qlen], targets [.., 1:]
 *   OUT:     /seg<k>/nll_sum, /seg<k>/tokens, /seg<k>/loss (float64), train: /seg<k>/grad/<name>;
 *            /state_dict_extras/pos_emb.inv_freq and /state_dict_extras/alias/<alias> = target name
 * Dropout is off unless SEED UPDATE FIRST are given: then segment k trains with dropout masks keyed by
 * (SEED, UPDATE + k, site) and global samples FIRST + 100·k + column. HS_TEST_DEVICE=cuda runs it on the
 * CUDA backend. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "config.h"
#include "models/txl.h"
#include "models/txl_config.h"
#include "nn/params.h"
#include "util/check.h"

#include "h5_driver.h"

int main(int argc, char **argv) {
    hs_comm comm;
    hs_comm_init(&comm, &argc, &argv);
    if ((argc != 6 && argc != 9) || (strcmp(argv[1], "train") != 0 && strcmp(argv[1], "eval") != 0)) {
        fprintf(stderr, "usage: %s train|eval CONFIG.cfg WEIGHTS.h5 TOKENS.h5 OUT.h5 [SEED UPDATE FIRST]\n", argv[0]);
        return 2;
    }
    const int with_dropout = argc == 9;
    const uint64_t drop_seed = with_dropout ? strtoull(argv[6], NULL, 10) : 0;
    const uint64_t drop_update = with_dropout ? strtoull(argv[7], NULL, 10) : 0;
    const int64_t drop_first = with_dropout ? strtoll(argv[8], NULL, 10) : 0;
    const int training = strcmp(argv[1], "train") == 0;
    hs_config *cfg = hs_config_load(argv[2], 0, NULL);
    hs_txl_config tc;
    hs_txl_config_load(cfg, 0, &tc);
    const char *device = getenv("HS_TEST_DEVICE");
    const hs_backend *be = hs_backend_select(device && *device ? device : "cpu", 0);

    /* the segments */
    hid_t tf = (hid_t)HS_H5(H5Fopen(argv[4], H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open the tokens file");
    hid_t td = (hid_t)HS_H5(H5Dopen2(tf, "/tokens", H5P_DEFAULT), NULL);
    hid_t ts = (hid_t)HS_H5(H5Dget_space(td), NULL);
    hsize_t dims[3];
    if (H5Sget_simple_extent_ndims(ts) != 3) hs_die("/tokens must be [segments, b, qlen + 1]");
    HS_H5(H5Sget_simple_extent_dims(ts, dims, NULL), NULL);
    const int nseg = (int)dims[0], b = (int)dims[1], qlen = (int)dims[2] - 1;
    int32_t *tokens;
    HS_ALLOC(tokens, (size_t)nseg * (size_t)b * (size_t)(qlen + 1));
    HS_H5(H5Dread(td, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens), NULL);
    HS_H5(H5Sclose(ts), NULL);
    HS_H5(H5Dclose(td), NULL);
    HS_H5(H5Fclose(tf), NULL);

    const int mem_len = training ? tc.mem_len : tc.eval_mem_len;
    hs_params params = {0};
    hs_txl *model = hs_txl_create(&params, &tc, b, qlen, mem_len);
    hs_params_allocate(&params, be);
    hs_txl_setup(model);
    hid_t wf = (hid_t)HS_H5(H5Fopen(argv[3], H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open the weights file");
    for (int t = 0; t < params.count; t++) h5_driver_read_param(wf, &params, t);
    HS_H5(H5Fclose(wf), NULL);
    hs_txl_memory *mem = hs_txl_memory_create(be, tc.n_layer, tc.d_model, b, mem_len);
    const hs_txl_segment seg = {.mem = mem,
                                .col0 = 0,
                                .clamp_len = training ? tc.clamp_len : tc.eval_clamp_len,
                                .same_length = training ? tc.same_length : tc.eval_same_length};

    hid_t out = (hid_t)HS_H5(H5Fcreate(argv[5], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create the output");
    double *stats_dev = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double));
    for (int k = 0; k < nseg; k++) {
        hs_txl_stage_batch(model, tokens + (size_t)k * (size_t)b * (size_t)(qlen + 1), b, qlen);
        be->zero(be, stats_dev, HS_STATS_NDOUBLE * sizeof(double));
        if (training) {
            const hs_step_ctx ctx = {.seed = drop_seed,
                                     .update = drop_update + (uint64_t)k,
                                     .training = with_dropout,
                                     .loss_scale = {1.0 / ((double)b * qlen), 0.0}};
            hs_params_zero_grad(&params);
            hs_txl_forward_backward(model, &seg, with_dropout ? drop_first + 100 * k : 0, &ctx, stats_dev);
        } else {
            hs_txl_evaluate(model, &seg, stats_dev);
        }
        double x[HS_STATS_NDOUBLE];
        be->download(be, x, stats_dev, sizeof x);
        char name[64];
        snprintf(name, sizeof name, "seg%d", k);
        hid_t g = (hid_t)HS_H5(H5Gcreate2(out, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
        const double nll = x[HS_STAT_LOSS_SUM] + x[HS_TXL_STAT_TAIL_NLL];
        h5_driver_write_scalar(g, "nll_sum", nll);
        h5_driver_write_scalar(g, "tokens", x[HS_STAT_SAMPLE_COUNT]);
        h5_driver_write_scalar(g, "tail_tokens", x[HS_TXL_STAT_TAIL_ROWS]);
        h5_driver_write_scalar(g, "loss", nll / x[HS_STAT_SAMPLE_COUNT]);
        if (training) {
            hid_t gg = (hid_t)HS_H5(H5Gcreate2(g, "grad", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
            for (int t = 0; t < params.count; t++) {
                const hs_tensor_info *ti = &params.tensors[t];
                float *host;
                HS_ALLOC(host, ti->numel);
                be->download(be, host, hs_param_grad(&params, t), ti->numel * sizeof *host);
                hsize_t gd[HS_MAX_DIMS];
                for (int d = 0; d < ti->ndim; d++) gd[d] = (hsize_t)ti->shape[d];
                h5_driver_write_dataset(gg, ti->name, H5T_NATIVE_FLOAT, host, ti->ndim, gd);
                free(host);
            }
            HS_H5(H5Gclose(gg), NULL);
        }
        HS_H5(H5Gclose(g), NULL);
    }
    /* what a PyTorch state_dict holds besides the table: the aliases and pos_emb.inv_freq */
    {
        hid_t sd = (hid_t)HS_H5(H5Gcreate2(out, "state_dict_extras", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
        float *inv;
        HS_ALLOC(inv, tc.d_model / 2);
        hs_txl_inv_freq(tc.d_model, inv);
        const hsize_t half = (hsize_t)(tc.d_model / 2);
        h5_driver_write_dataset(sd, "pos_emb.inv_freq", H5T_NATIVE_FLOAT, inv, 1, &half);
        free(inv);
        const char *alias[16], *target[16];
        const int n = hs_txl_state_dict_aliases(model, alias, target, 16);
        hid_t ag = (hid_t)HS_H5(H5Gcreate2(sd, "alias", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
        for (int i = 0; i < n; i++) {
            hid_t st = (hid_t)HS_H5(H5Tcopy(H5T_C_S1), NULL);
            HS_H5(H5Tset_size(st, strlen(target[i]) + 1), NULL);
            h5_driver_write_dataset(ag, alias[i], st, target[i], 0, NULL);
            HS_H5(H5Tclose(st), NULL);
        }
        HS_H5(H5Gclose(ag), NULL);
        HS_H5(H5Gclose(sd), NULL);
    }
    be->free(be, stats_dev);
    HS_H5(H5Fclose(out), NULL);
    hs_txl_memory_free(be, mem);
    hs_txl_free(model);
    hs_params_free(&params);
    free(tokens);
    hs_config_free(cfg);
    hs_comm_finalize(&comm);
    return 0;
}
