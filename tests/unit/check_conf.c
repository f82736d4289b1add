/* Every example experiment a user copies from conf/ loads with hetseq's own configuration loader (the
 * same schema, types and ranges as `hetseq train`), and the BERT recipes say what their comments say:
 *   global batch = ranks x training.max_sentences x training.update_freq = NVIDIA's 65536 (phase 1,
 *   sequence length 128) or 32768 (phase 2, 512) at the number of ranks the file names;
 *   LAMB with lr 6e-3 / 4e-3, eps 1e-6, decoupled decay 0.01, clipping at 1.0, no trust ratio on
 *   the no-decay tensors; poly_warmup with power
 *   0.5, warm-up 0.2843 / 0.128 of 7038 / 1563 updates, training exactly that long;
 *   phase 2 starts from phase 1's checkpoint_last.h5 keeping the optimizer moments but resetting the
 *   schedule and the update counter; a model.config_file exists in the source tree.
 * A file that does not load ends this program with the loader's message (file, line, key). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#ifndef HS_TOP_SRCDIR
#define HS_TOP_SRCDIR "."
#endif

/* The recipe each BERT file states in its header comment. */
typedef struct {
    const char *file;
    int ranks;          /* the world size the comment computes the global batch for */
    int phase;          /* 1: seq 128, global 65536; 2: seq 512, global 32768 */
} bert_recipe;

static const bert_recipe recipes[] = {
    {"bert_tiny_phase1.cfg", 32, 1},  {"bert_tiny_phase2.cfg", 32, 2},  {"bert_mini_phase1.cfg", 32, 1},
    {"bert_mini_phase2.cfg", 32, 2},  {"bert_base_phase1.cfg", 8, 1},   {"bert_base_phase2.cfg", 8, 2},
    {"bert_large_phase1.cfg", 8, 1},  {"bert_large_phase2.cfg", 8, 2},
};
#define N_RECIPES ((int)(sizeof recipes / sizeof recipes[0]))

static int failures = 0;

static void expect(int ok, const char *file, const char *what) {
    if (!ok) {
        fprintf(stderr, "FAIL: conf/%s: %s\n", file, what);
        failures++;
    }
}

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

static void check_bert(const char *top, const char *file, const hs_config *c, const bert_recipe *r) {
    const int64_t global = r->phase == 1 ? 65536 : 32768;
    const int64_t total = r->phase == 1 ? 7038 : 1563;
    int64_t batch = (int64_t)r->ranks * hs_cfg_int(c, "training.max_sentences") *
                    hs_cfg_int_elem(c, "training.update_freq", 0);
    char msg[512];
    snprintf(msg, sizeof msg, "%d ranks x max_sentences x update_freq = %lld, want %lld", r->ranks,
             (long long)batch, (long long)global);
    expect(batch == global, file, msg);
    expect(hs_cfg_list_len(c, "training.update_freq") == 1, file, "one update_freq for every epoch");
    expect(strcmp(hs_cfg_string(c, "task"), "bert") == 0, file, "task = \"bert\"");
    expect(strcmp(hs_cfg_string(c, "optimizer.name"), "lamb") == 0, file, "optimizer.name = \"lamb\"");
    expect(near(hs_cfg_float(c, "optimizer.lr"), r->phase == 1 ? 6e-3 : 4e-3), file, "optimizer.lr 6e-3 / 4e-3");
    expect(near(hs_cfg_float(c, "optimizer.adam_eps"), 1e-6), file, "optimizer.adam_eps = 1e-6");
    expect(near(hs_cfg_float(c, "optimizer.weight_decay"), 0.01), file, "optimizer.weight_decay = 0.01");
    expect(near(hs_cfg_float(c, "optimizer.clip_norm"), 1.0), file, "optimizer.clip_norm = 1.0");
    expect(!hs_cfg_bool(c, "optimizer.lamb_trust_ratio_on_no_decay"), file,
           "no trust ratio on bias/LayerNorm tensors (apex FusedLAMB of the published runs)");
    expect(near(hs_cfg_float_elem(c, "optimizer.adam_betas", 0), 0.9) &&
               near(hs_cfg_float_elem(c, "optimizer.adam_betas", 1), 0.999), file, "adam_betas [0.9, 0.999]");
    expect(strcmp(hs_cfg_string(c, "lr_scheduler.name"), "poly_warmup") == 0, file, "lr_scheduler poly_warmup");
    expect(near(hs_cfg_float(c, "lr_scheduler.warmup_proportion"), r->phase == 1 ? 0.2843 : 0.128), file,
           "warmup_proportion 0.2843 / 0.128");
    expect(near(hs_cfg_float(c, "lr_scheduler.power"), 0.5), file, "lr_scheduler.power = 0.5");
    expect(hs_cfg_int(c, "lr_scheduler.total_num_update") == total, file, "total_num_update 7038 / 1563");
    expect(hs_cfg_int(c, "training.max_update") == total, file, "max_update = total_num_update");
    expect(hs_cfg_int(c, "checkpoint.save_interval_updates") == 200, file, "save_interval_updates = 200");
    expect(hs_cfg_int(c, "checkpoint.keep_last") == 3, file, "keep_last = 3");
    expect(hs_cfg_int(c, "model.pad_vocab_to_multiple_of") == 8, file, "vocabulary padded to a multiple of 8");
    expect(strstr(hs_cfg_string(c, "data.path"), r->phase == 1 ? "seq_len_128_max_pred_20" : "seq_len_512_max_pred_80") !=
               NULL, file, "data.path names the shards of the phase's sequence length");

    const char *json = hs_cfg_string(c, "model.config_file");
    if (*json) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", top, json);
        expect(access(path, R_OK) == 0, file, "model.config_file is not a file of the source tree");
    }

    /* Phase 1 writes checkpoints/<name>_phase1/; phase 2 starts from its checkpoint_last.h5. */
    char phase1_dir[256], want_init[512];
    snprintf(phase1_dir, sizeof phase1_dir, "%.*s1", (int)(strlen(file) - strlen("1.cfg")), file);
    snprintf(want_init, sizeof want_init, "checkpoints/%s/checkpoint_last.h5", phase1_dir);
    if (r->phase == 1) {
        char want_dir[512];
        snprintf(want_dir, sizeof want_dir, "checkpoints/%s", phase1_dir);
        expect(strcmp(hs_cfg_string(c, "checkpoint.save_dir"), want_dir) == 0, file, "save_dir checkpoints/<file name>");
        expect(*hs_cfg_string(c, "checkpoint.init_checkpoint") == '\0', file, "phase 1 starts from scratch");
    } else {
        expect(strcmp(hs_cfg_string(c, "checkpoint.init_checkpoint"), want_init) == 0, file,
               "phase 2 init_checkpoint = phase 1's checkpoint_last.h5");
        expect(hs_cfg_bool(c, "checkpoint.reset_lr_scheduler") && hs_cfg_bool(c, "checkpoint.reset_step"), file,
               "phase 2 resets the schedule and the update counter");
        expect(!hs_cfg_bool(c, "checkpoint.reset_optimizer"), file, "phase 2 keeps the optimizer moments");
    }
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int main(void) {
    const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : HS_TOP_SRCDIR;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/conf", top);
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "FAIL: cannot open %s\n", dir);
        return 1;
    }
    int loaded = 0, seen[N_RECIPES] = {0};
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!ends_with(e->d_name, ".cfg")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        hs_config *c = hs_config_load(path, 0, NULL); /* exits with the loader's message on an error */
        loaded++;
        int known = 0;
        for (int i = 0; i < N_RECIPES; i++)
            if (strcmp(e->d_name, recipes[i].file) == 0) {
                check_bert(top, e->d_name, c, &recipes[i]);
                seen[i] = known = 1;
            }
        if (!known && strncmp(e->d_name, "bert_", 5) == 0 && strstr(e->d_name, "_phase"))
            expect(0, e->d_name, "a BERT phase recipe this test does not know: add it to recipes[]");
        printf("ok: conf/%s loads\n", e->d_name);
        hs_config_free(c);
    }
    closedir(d);
    for (int i = 0; i < N_RECIPES; i++) expect(seen[i], recipes[i].file, "missing");
    if (failures) return 1;
    printf("PASS: %d experiment files\n", loaded);
    return 0;
}
