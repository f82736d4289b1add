/* Reading and checking the Transformer-XL keys (txl.* of the experiment file). */
#include "models/txl_config.h"

#include <stdio.h>
#include <string.h>

#include "util/check.h"

void hs_txl_config_check(const hs_txl_config *c) {
    const struct {
        const char *key;
        int value;
    } sizes[] = {{"txl.n_token", c->n_token},   {"txl.n_layer", c->n_layer},       {"txl.n_head", c->n_head},
                 {"txl.d_head", c->d_head},     {"txl.d_model", c->d_model},       {"txl.d_inner", c->d_inner},
                 {"txl.d_embed", c->d_embed},   {"txl.tgt_len", c->tgt_len},       {"txl.eval_tgt_len", c->eval_tgt_len},
                 {"txl.div_val", c->div_val},   {"txl.batch_size", c->batch_size}, {"txl.eval_batch_size", c->eval_batch_size}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value < 1) hs_die_all("%s = %d must be at least 1", sizes[i].key, sizes[i].value);
    if (c->ext_len != 0)
        hs_die_all("txl.ext_len = %d: hetseq implements ext_len = 0 only (NVIDIA's default; the extended context "
                   "is not part of the published recipes); set txl.ext_len = 0",
                   c->ext_len);
    if (c->mem_len < 0 || c->eval_mem_len < 0)
        hs_die_all("txl.mem_len = %d and txl.eval_mem_len = %d must be >= 0", c->mem_len, c->eval_mem_len);
    if (!(c->dropout >= 0.0 && c->dropout < 1.0) || !(c->dropatt >= 0.0 && c->dropatt < 1.0))
        hs_die_all("txl.dropout = %g and txl.dropatt = %g must be in [0, 1)", c->dropout, c->dropatt);
    if (c->d_model % 2 != 0)
        hs_die_all("txl.d_model = %d must be even: the sinusoid positional embedding is [sin, cos] of d_model/2 "
                   "frequencies",
                   c->d_model);
    for (int i = 0; i < c->n_cutoffs; i++) {
        const int lo = i == 0 ? 0 : c->cutoffs[i - 1];
        if (c->cutoffs[i] <= lo || c->cutoffs[i] >= c->n_token)
            hs_die_all("txl.cutoffs = [..., %d, ...]: the cutoffs must increase strictly, start above 0 and stay "
                       "below the vocabulary size n_token = %d (the last cluster ends at n_token)",
                       c->cutoffs[i], c->n_token);
    }
    int d = c->d_embed;
    for (int i = 1; i <= c->n_cutoffs; i++) {
        if (d % c->div_val != 0 || d / c->div_val < 1)
            hs_die_all("txl.div_val = %d does not divide txl.d_embed = %d %d times: cluster i embeds in "
                       "d_embed / div_val^i columns; choose d_embed divisible by div_val^%d",
                       c->div_val, c->d_embed, c->n_cutoffs, c->n_cutoffs);
        d /= c->div_val;
    }
    if (c->tgt_len + c->mem_len > 1000000 || c->eval_tgt_len + c->eval_mem_len > 1000000)
        hs_die_all("txl.tgt_len + txl.mem_len (%d + %d) or txl.eval_tgt_len + txl.eval_mem_len (%d + %d) is "
                   "unreasonably long (over 10^6 keys per query)",
                   c->tgt_len, c->mem_len, c->eval_tgt_len, c->eval_mem_len);
    if (!(c->init_std >= 0.0) || !(c->proj_init_std >= 0.0))
        hs_die_all("txl.init_std = %g and txl.proj_init_std = %g must be >= 0", c->init_std, c->proj_init_std);
}

void hs_txl_config_read(const hs_config *cfg, hs_txl_config *c, char *n_token_origin, int origin_len) {
    memset(c, 0, sizeof *c);
    c->n_token = (int)hs_cfg_int(cfg, "txl.n_token");
    hs_cfg_origin(cfg, "txl.n_token", n_token_origin, origin_len);
    c->n_layer = (int)hs_cfg_int(cfg, "txl.n_layer");
    c->n_head = (int)hs_cfg_int(cfg, "txl.n_head");
    c->d_head = (int)hs_cfg_int(cfg, "txl.d_head");
    c->d_model = (int)hs_cfg_int(cfg, "txl.d_model");
    c->d_inner = (int)hs_cfg_int(cfg, "txl.d_inner");
    const int d_embed = (int)hs_cfg_int(cfg, "txl.d_embed");
    c->d_embed = d_embed > 0 ? d_embed : c->d_model; /* train.py: d_embed < 0 means d_model */
    c->dropout = hs_cfg_float(cfg, "txl.dropout");
    c->dropatt = hs_cfg_float(cfg, "txl.dropatt");
    c->tgt_len = (int)hs_cfg_int(cfg, "txl.tgt_len");
    c->mem_len = (int)hs_cfg_int(cfg, "txl.mem_len");
    c->ext_len = (int)hs_cfg_int(cfg, "txl.ext_len");
    c->clamp_len = (int)hs_cfg_int(cfg, "txl.clamp_len");
    c->same_length = hs_cfg_bool(cfg, "txl.same_length");
    c->eval_tgt_len = (int)hs_cfg_int(cfg, "txl.eval_tgt_len");
    const int eval_mem_len = (int)hs_cfg_int(cfg, "txl.eval_mem_len");
    /* NVIDIA's validation keeps the number of keys per query: mem_len + tgt_len - eval_tgt_len (train.py's
     * evaluate(): reset_length(eval_tgt_len, ext_len, mem_len + tgt_len - eval_tgt_len)) */
    c->eval_mem_len = eval_mem_len >= 0 ? eval_mem_len
                                        : (c->mem_len > 0 ? c->mem_len + c->tgt_len - c->eval_tgt_len : 0);
    if (c->eval_mem_len < 0) c->eval_mem_len = 0;
    const int eval_clamp = (int)hs_cfg_int(cfg, "txl.eval_clamp_len");
    c->eval_clamp_len = eval_clamp >= 0 ? eval_clamp : c->clamp_len;
    c->eval_same_length = hs_cfg_bool(cfg, "txl.eval_same_length");
    c->pre_lnorm = hs_cfg_bool(cfg, "txl.pre_lnorm");
    snprintf(c->attention, sizeof c->attention, "%s", hs_cfg_string(cfg, "attention"));
    c->adaptive = hs_cfg_bool(cfg, "txl.adaptive");
    if (c->adaptive) {
        const int n = hs_cfg_list_len(cfg, "txl.cutoffs");
        if (n > HS_TXL_MAX_CUTOFFS) hs_die_all("txl.cutoffs has %d entries; at most %d are supported", n, HS_TXL_MAX_CUTOFFS);
        c->n_cutoffs = n;
        for (int i = 0; i < n; i++) {
            const int64_t v = hs_cfg_int_elem(cfg, "txl.cutoffs", i);
            if (v < 1 || v > 2147483647) hs_die_all("txl.cutoffs: element %d = %lld is out of range", i + 1, (long long)v);
            c->cutoffs[i] = (int)v;
        }
    }
    c->div_val = (int)hs_cfg_int(cfg, "txl.div_val");
    c->tie_weight = hs_cfg_bool(cfg, "txl.tie_weight");
    c->tie_projs = hs_cfg_bool(cfg, "txl.tie_projs");
    c->batch_size = (int)hs_cfg_int(cfg, "txl.batch_size");
    c->eval_batch_size = (int)hs_cfg_int(cfg, "txl.eval_batch_size");
    c->varlen = hs_cfg_bool(cfg, "txl.varlen");
    c->init_std = hs_cfg_float(cfg, "txl.init_std");
    c->proj_init_std = hs_cfg_float(cfg, "txl.proj_init_std");
}

void hs_txl_config_resolve(hs_txl_config *c, int data_vocab, const char *n_token_origin) {
    const int n_token = c->n_token;
    if (n_token > 0 && data_vocab > 0 && n_token != data_vocab)
        hs_die_all("txl.n_token = %d (set at %s) does not match the data's vocabulary of %d words: the model and "
                   "the data do not belong together; remove txl.n_token (it then comes from the data) or prepare "
                   "the data with the model's vocabulary",
                   n_token, n_token_origin, data_vocab);
    c->n_token = n_token > 0 ? n_token : data_vocab;
    if (c->n_token < 1)
        hs_die_all("the vocabulary size is unknown: the data gives none and txl.n_token is 0; prepare the data with "
                   "`hetseq prep lm` or set txl.n_token");
    hs_txl_config_check(c);
}

void hs_txl_config_load(const hs_config *cfg, int data_vocab, hs_txl_config *c) {
    char origin[256];
    hs_txl_config_read(cfg, c, origin, (int)sizeof origin);
    hs_txl_config_resolve(c, data_vocab, origin);
}
