/* Helper of tests/ref/test_checkpoint_h5py.py: writes a checkpoint of a small CNN-shaped model with
 * values given by a formula the Python side recomputes, or loads a checkpoint (e.g. one whose tensors
 * PyTorch replaced) and prints every tensor value as a hex float.
 *   checkpoint_driver write DIR     -> DIR/checkpoint_last.h5
 *   checkpoint_driver dump FILE     -> "<group>/<name> <%a> <%a> ..." per tensor, then the state */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"

/* conv1 = Conv2d(1, 2, 3), fc1 = Linear(8, 4) */
static void declare(hs_params *p) {
    const int64_t conv_w[4] = {2, 1, 3, 3}, conv_b[1] = {2}, fc_w[2] = {4, 8}, fc_b[1] = {4};
    memset(p, 0, sizeof *p);
    hs_params_declare(p, "conv1.weight", 4, conv_w, 1);
    hs_params_declare(p, "conv1.bias", 1, conv_b, 0);
    hs_params_declare(p, "fc1.weight", 2, fc_w, 1);
    hs_params_declare(p, "fc1.bias", 1, fc_b, 0);
    hs_params_allocate(p, hs_backend_cpu());
}

static void make_adam(hs_optimizer *o, hs_params *p) {
    memset(o, 0, sizeof *o);
    o->name = "adam";
    o->params = p;
    o->n_states = 2;
    o->state_names[0] = "exp_avg";
    o->state_names[1] = "exp_avg_sq";
    for (int s = 0; s < 2; s++) o->state[s] = p->be->alloc(p->be, p->total * sizeof(float));
}

/* value of element k of tensor t: exactly representable, so Python can recompute it bit for bit.
 * exp_avg = value / 2, exp_avg_sq = value^2 (exact: few significant bits). */
static float formula(int t, size_t k) { return (float)((int)(k % 17) - 8) * 0.125f + (float)t * 0.0078125f; }

static int write_checkpoint(const char *dir) {
    hs_params p;
    declare(&p);
    hs_optimizer opt;
    make_adam(&opt, &p);
    float *w = calloc(p.total, sizeof(float)), *m = calloc(p.total, sizeof(float)), *v = calloc(p.total, sizeof(float));
    if (!w || !m || !v) return 1;
    for (int t = 0; t < p.count; t++)
        for (size_t k = 0; k < p.tensors[t].numel; k++) {
            float x = formula(t, k);
            w[p.tensors[t].offset + k] = x;
            m[p.tensors[t].offset + k] = x / 2;
            v[p.tensors[t].offset + k] = x * x;
        }
    p.be->upload(p.be, p.data, w, p.total * sizeof(float));
    p.be->upload(p.be, opt.state[0], m, p.total * sizeof(float));
    p.be->upload(p.be, opt.state[1], v, p.total * sizeof(float));
    opt.step = 42;
    hs_train_state st = {.epoch = 2, .updates_in_epoch = 5, .num_updates = 17, .end_of_epoch = 0,
                         .lr_base = 0.01, .lr = 0.005, .meter_loss_sum = 12.5, .meter_sample_count = 1088,
                         .meter_gnorm_sum = 3.25, .meter_clip_count = 1, .meter_updates = 17,
                         .train_wall = 1.5, .seed = 18446744073709551557ull, .world_size = 4,
                         .train_samples = 60000, .loss_scale = 65536.0, .loss_scale_good_steps = 7,
                         .loss_scale_skipped = 3};
    hs_checkpoint_save(dir, "checkpoint_last.h5", &p, &opt, &st, "task = \"mnist\";\nseed = 1;  # naïve\n");
    free(w);
    free(m);
    free(v);
    return 0;
}

static void print_flat(const char *group, const hs_params *p, const float *dev) {
    float *h = calloc(p->total, sizeof(float));
    p->be->download(p->be, h, dev, p->total * sizeof(float));
    for (int t = 0; t < p->count; t++) {
        printf("%s/%s", group, p->tensors[t].name);
        for (size_t k = 0; k < p->tensors[t].numel; k++) printf(" %a", (double)h[p->tensors[t].offset + k]);
        printf("\n");
    }
    free(h);
}

static int dump_checkpoint(const char *path) {
    hs_params p;
    declare(&p);
    hs_optimizer opt;
    make_adam(&opt, &p);
    hs_train_state st;
    char *cfg = NULL;
    hs_checkpoint_load(path, &p, &opt, &st, &cfg);
    print_flat("model", &p, p.data);
    print_flat("optimizer/exp_avg", &p, opt.state[0]);
    print_flat("optimizer/exp_avg_sq", &p, opt.state[1]);
    printf("step %" PRId64 "\nepoch %" PRId64 "\nnum_updates %" PRId64 "\nseed %" PRIu64 "\nlr %a\n", opt.step,
           st.epoch, st.num_updates, st.seed, st.lr);
    printf("config_bytes %zu\n", cfg ? strlen(cfg) : 0);
    free(cfg);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "write") == 0) return write_checkpoint(argv[2]);
    if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump_checkpoint(argv[2]);
    fprintf(stderr, "usage: %s write DIR | dump FILE\n", argv[0]);
    return 2;
}
