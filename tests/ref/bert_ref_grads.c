/* Helper of test_bert_vs_torch.py: builds hetseq's BERT from an experiment file, loads its weights by
 * their PyTorch names, reads one micro-batch from an NVIDIA shard through the shard reader, runs one
 * forward/backward with the loss normalised as the trainer does (loss_scale = {1/labelled tokens,
 * 1/sentences}: the gradient of mean MLM + mean NSP loss) and writes the loss terms and every
 * parameter's gradient.
 *   usage: bert_ref_grads CONFIG.cfg SHARD.h5 WEIGHTS.h5 OUT.h5 [SEED UPDATE FIRST_SAMPLE]
 *   CONFIG:  experiment file (task = "bert", model.*); SHARD: rows [0, B) are the micro-batch (B = rows)
 *   WEIGHTS: /model/<name> float32 for every parameter (extra datasets are ignored)
 *   OUT:     /mlm_loss_sum /mlm_count /mlm_correct /nsp_loss_sum /nsp_correct /sentences /loss (float64),
 *            /grad/<name> float32 in the parameter's shape
 *   With SEED UPDATE FIRST_SAMPLE the pass runs in training mode (dropout on, masks keyed by them);
 *   without, dropout is off. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "config.h"
#include "data/bert_shards.h"
#include "models/bert.h"
#include "models/bert_config.h"
#include "nn/params.h"
#include "util/check.h"

#include "h5_driver.h"

int main(int argc, char **argv) {
    hs_comm comm;
    hs_comm_init(&comm, &argc, &argv);
    if (argc != 5 && argc != 8) {
        fprintf(stderr, "usage: %s CONFIG.cfg SHARD.h5 WEIGHTS.h5 OUT.h5 [SEED UPDATE FIRST_SAMPLE]\n", argv[0]);
        return 2;
    }
    const int training = argc == 8;
    hs_config *cfg = hs_config_load(argv[1], 0, NULL);
    hs_bert_config bc;
    hs_bert_config_load(cfg, &bc);
    /* HS_TEST_DEVICE=cuda: the same check on the CUDA backend (tests/cuda/test_torch_on_cuda.sh) */
    const char *device = getenv("HS_TEST_DEVICE");
    const hs_backend *be = hs_backend_select(device && *device ? device : "cpu", 0);

    hs_bert_shards *shards = hs_bert_shards_open(argv[2], NULL, 0, comm.io);
    const int rows = (int)hs_bert_shards_num_samples(shards), L = hs_bert_shards_seq_len(shards),
              P = hs_bert_shards_max_pred(shards);
    void *buf = malloc(hs_bert_batch_bytes(rows, L, P));
    if (!buf) HS_FATAL(NULL, "out of memory");
    hs_bert_shards_read(shards, 0, rows, bc.vocab_size, buf);

    hs_params params = {0};
    hs_bert *model = hs_bert_create(&params, &bc, rows, L, P);
    hs_params_allocate(&params, be);
    hs_bert_setup(model);
    hid_t wf = (hid_t)HS_H5(H5Fopen(argv[3], H5F_ACC_RDONLY, H5P_DEFAULT), "cannot open the weights file");
    for (int t = 0; t < params.count; t++) h5_driver_read_param(wf, &params, t);
    HS_H5(H5Fclose(wf), NULL);

    const hs_bert_batch *batch = buf;
    const int labelled = hs_bert_stage_batch(model, batch);
    hs_step_ctx ctx = {.seed = 0, .update = 0, .training = 0,
                       .loss_scale = {labelled ? 1.0 / labelled : 0.0, 1.0 / rows}};
    int64_t first_sample = 0;
    if (training) {
        ctx.training = 1;
        ctx.seed = strtoull(argv[5], NULL, 10);
        ctx.update = strtoull(argv[6], NULL, 10);
        first_sample = strtoll(argv[7], NULL, 10);
    }
    double *stats_dev = params.be->alloc(params.be, HS_STATS_NDOUBLE * sizeof(double)); /* zero-filled */
    hs_params_zero_grad(&params);
    hs_bert_forward_backward(model, first_sample, &ctx, stats_dev);
    double x[HS_STATS_NDOUBLE];
    params.be->download(params.be, x, stats_dev, sizeof x);
    params.be->free(params.be, stats_dev);

    hid_t out = (hid_t)HS_H5(H5Fcreate(argv[4], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create the output");
    h5_driver_write_scalar(out, "mlm_loss_sum", x[HS_BERT_STAT_MLM_LOSS]);
    h5_driver_write_scalar(out, "mlm_count", x[HS_BERT_STAT_MLM_COUNT]);
    h5_driver_write_scalar(out, "mlm_correct", x[HS_BERT_STAT_MLM_CORRECT]);
    h5_driver_write_scalar(out, "nsp_loss_sum", x[HS_BERT_STAT_NSP_LOSS]);
    h5_driver_write_scalar(out, "nsp_correct", x[HS_BERT_STAT_NSP_CORRECT]);
    h5_driver_write_scalar(out, "sentences", x[HS_BERT_STAT_SENTENCES]);
    h5_driver_write_scalar(out, "loss", x[HS_BERT_STAT_MLM_LOSS] / x[HS_BERT_STAT_MLM_COUNT] +
                                  x[HS_BERT_STAT_NSP_LOSS] / x[HS_BERT_STAT_SENTENCES]);
    hid_t grad = (hid_t)HS_H5(H5Gcreate2(out, "grad", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
    for (int t = 0; t < params.count; t++) {
        const hs_tensor_info *ti = &params.tensors[t];
        float *host;
        HS_ALLOC(host, ti->numel);
        be->download(be, host, hs_param_grad(&params, t), ti->numel * sizeof *host);
        hsize_t dims[HS_MAX_DIMS];
        for (int d = 0; d < ti->ndim; d++) dims[d] = (hsize_t)ti->shape[d];
        h5_driver_write_dataset(grad, ti->name, H5T_NATIVE_FLOAT, host, ti->ndim, dims);
        free(host);
    }
    HS_H5(H5Gclose(grad), NULL);
    HS_H5(H5Fclose(out), NULL);

    hs_bert_free(model);
    hs_params_free(&params);
    hs_bert_shards_close(shards);
    free(buf);
    hs_config_free(cfg);
    hs_comm_finalize(&comm);
    return 0;
}
