/* Reading the BERT model's shape from bert_config.json (json-c) or the experiment file's model.* keys. */
#include "models/bert_config.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

void hs_bert_config_defaults(hs_bert_config *c) {
    *c = (hs_bert_config){.vocab_size = 30522,
                          .hidden_size = 768,
                          .num_hidden_layers = 12,
                          .num_attention_heads = 12,
                          .intermediate_size = 3072,
                          .max_position_embeddings = 512,
                          .type_vocab_size = 2,
                          .hidden_dropout_prob = 0.1,
                          .attention_probs_dropout_prob = 0.1,
                          .initializer_range = 0.02,
                          .hidden_act = "gelu",
                          .attention = "auto"};
    c->padded_vocab_size = c->vocab_size;
}

int hs_bert_padded_vocab(int vocab, int multiple) {
    if (multiple <= 1 || vocab % multiple == 0) return vocab;
    return vocab + multiple - vocab % multiple;
}

/* ---- bert_config.json ---------------------------------------------------------------------------- */

/* An integer key: a JSON integer, or a JSON number with an integral value (768.0), within int range. */
static void json_int(json_object *root, const char *path, const char *key, int *dst) {
    json_object *v;
    if (!json_object_object_get_ex(root, key, &v)) return;
    double x;
    if (json_object_is_type(v, json_type_int)) {
        x = (double)json_object_get_int64(v);
    } else if (json_object_is_type(v, json_type_double)) {
        x = json_object_get_double(v);
        if (x != floor(x)) hs_die_all("%s: \"%s\" is %g; it must be a whole number", path, key, x);
    } else {
        hs_die_all("%s: \"%s\" must be an integer, not %s", path, key, json_object_to_json_string(v));
    }
    if (x < -2147483647.0 || x > 2147483647.0) hs_die_all("%s: \"%s\" = %g is out of range", path, key, x);
    *dst = (int)x;
}

static void json_float(json_object *root, const char *path, const char *key, double *dst) {
    json_object *v;
    if (!json_object_object_get_ex(root, key, &v)) return;
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        hs_die_all("%s: \"%s\" must be a number, not %s", path, key, json_object_to_json_string(v));
    *dst = json_object_get_double(v);
    if (!isfinite(*dst)) hs_die_all("%s: \"%s\" must be a finite number", path, key);
}

static void json_string(json_object *root, const char *path, const char *key, char *dst, size_t n) {
    json_object *v;
    if (!json_object_object_get_ex(root, key, &v)) return;
    if (!json_object_is_type(v, json_type_string))
        hs_die_all("%s: \"%s\" must be a string, not %s", path, key, json_object_to_json_string(v));
    const char *s = json_object_get_string(v);
    if (strlen(s) >= n) hs_die_all("%s: \"%s\" = \"%s\" is not a known activation (use \"gelu\")", path, key, s);
    strcpy(dst, s);
}

void hs_bert_config_read_json(const char *path, hs_bert_config *out) {
    FILE *probe = fopen(path, "r");
    if (!probe)
        hs_die_all("model.config_file = \"%s\": cannot open it (%s); give the path of a bert_config.json", path,
                   strerror(errno));
    fclose(probe);
    json_object *root = json_object_from_file(path);
    if (!root)
        hs_die_all("model.config_file = \"%s\" is not valid JSON (%s); it must be a bert_config.json object such as "
                   "{\"vocab_size\": 30522, \"hidden_size\": 768, ...}",
                   path, json_util_get_last_err() ? json_util_get_last_err() : "parse error");
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        hs_die_all("model.config_file = \"%s\": the file must hold one JSON object ({...}) of bert_config keys", path);
    }
    hs_bert_config_defaults(out);
    json_int(root, path, "vocab_size", &out->vocab_size);
    json_int(root, path, "hidden_size", &out->hidden_size);
    json_int(root, path, "num_hidden_layers", &out->num_hidden_layers);
    json_int(root, path, "num_attention_heads", &out->num_attention_heads);
    json_int(root, path, "intermediate_size", &out->intermediate_size);
    json_string(root, path, "hidden_act", out->hidden_act, sizeof out->hidden_act);
    json_float(root, path, "hidden_dropout_prob", &out->hidden_dropout_prob);
    json_float(root, path, "attention_probs_dropout_prob", &out->attention_probs_dropout_prob);
    json_int(root, path, "max_position_embeddings", &out->max_position_embeddings);
    json_int(root, path, "type_vocab_size", &out->type_vocab_size);
    json_float(root, path, "initializer_range", &out->initializer_range);
    out->padded_vocab_size = out->vocab_size;
    json_object_put(root);
}

/* ---- checks -------------------------------------------------------------------------------------- */

void hs_bert_config_check(const hs_bert_config *c, const char *where, const char *key_prefix) {
    const struct {
        const char *key;
        int value;
    } sizes[] = {{"vocab_size", c->vocab_size},
                 {"hidden_size", c->hidden_size},
                 {"num_hidden_layers", c->num_hidden_layers},
                 {"num_attention_heads", c->num_attention_heads},
                 {"intermediate_size", c->intermediate_size},
                 {"max_position_embeddings", c->max_position_embeddings},
                 {"type_vocab_size", c->type_vocab_size}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value < 1) hs_die_all("%s%s%s = %d must be at least 1", where, key_prefix, sizes[i].key, sizes[i].value);
    if (c->hidden_size % c->num_attention_heads != 0)
        hs_die_all("%s%shidden_size (%d) is not a multiple of %snum_attention_heads (%d): every head gets "
                   "hidden_size / num_attention_heads columns",
                   where, key_prefix, c->hidden_size, key_prefix, c->num_attention_heads);
    const struct {
        const char *key;
        double value;
    } probs[] = {{"hidden_dropout_prob", c->hidden_dropout_prob},
                 {"attention_probs_dropout_prob", c->attention_probs_dropout_prob}};
    for (size_t i = 0; i < 2; i++)
        if (!(probs[i].value >= 0.0 && probs[i].value < 1.0))
            hs_die_all("%s%s%s = %g must be in [0, 1)", where, key_prefix, probs[i].key, probs[i].value);
    if (!(c->initializer_range >= 0.0))
        hs_die_all("%s%sinitializer_range = %g must be >= 0", where, key_prefix, c->initializer_range);
    if (strcmp(c->hidden_act, "gelu") != 0)
        hs_die_all("%s%shidden_act = \"%s\": hetseq's BERT implements \"gelu\" (exact erf form, as NVIDIA's "
                   "pre-training) only; set it to \"gelu\"",
                   where, key_prefix, c->hidden_act);
    if ((size_t)c->padded_vocab_size * (size_t)c->hidden_size > (size_t)2147483647)
        hs_die_all("%s%svocab_size x hidden_size = %zu values is too large for one embedding table", where, key_prefix,
                   (size_t)c->padded_vocab_size * (size_t)c->hidden_size);
}

/* ---- the experiment file -------------------------------------------------------------------------- */

static const char *const model_keys[] = {"model.vocab_size", "model.hidden_size", "model.num_hidden_layers",
                                         "model.num_attention_heads", "model.intermediate_size", "model.hidden_act",
                                         "model.hidden_dropout_prob", "model.attention_probs_dropout_prob",
                                         "model.max_position_embeddings", "model.type_vocab_size",
                                         "model.initializer_range"};

void hs_bert_config_load(const hs_config *cfg, hs_bert_config *out) {
    const char *file = hs_cfg_string(cfg, "model.config_file");
    const int multiple = (int)hs_cfg_int(cfg, "model.pad_vocab_to_multiple_of");
    char where[1100] = "";
    const char *key_prefix = "model.";
    if (*file) {
        hs_bert_config_read_json(file, out);
        snprintf(where, sizeof where, "model.config_file = \"%s\": ", file);
        key_prefix = "";
        /* The file decides the shape; say so when the experiment file also sets a model key. */
        for (size_t i = 0; i < sizeof model_keys / sizeof model_keys[0]; i++) {
            char origin[256];
            if (strcmp(hs_cfg_origin(cfg, model_keys[i], origin, sizeof origin), "default") != 0 && hs_log_rank() == 0)
                hs_warn("%s (set at %s) is ignored: model.config_file = \"%s\" gives the model's shape", model_keys[i],
                        origin, file);
        }
    } else {
        hs_bert_config_defaults(out);
        out->vocab_size = (int)hs_cfg_int(cfg, "model.vocab_size");
        out->hidden_size = (int)hs_cfg_int(cfg, "model.hidden_size");
        out->num_hidden_layers = (int)hs_cfg_int(cfg, "model.num_hidden_layers");
        out->num_attention_heads = (int)hs_cfg_int(cfg, "model.num_attention_heads");
        out->intermediate_size = (int)hs_cfg_int(cfg, "model.intermediate_size");
        snprintf(out->hidden_act, sizeof out->hidden_act, "%s", hs_cfg_string(cfg, "model.hidden_act"));
        out->hidden_dropout_prob = hs_cfg_float(cfg, "model.hidden_dropout_prob");
        out->attention_probs_dropout_prob = hs_cfg_float(cfg, "model.attention_probs_dropout_prob");
        out->max_position_embeddings = (int)hs_cfg_int(cfg, "model.max_position_embeddings");
        out->type_vocab_size = (int)hs_cfg_int(cfg, "model.type_vocab_size");
        out->initializer_range = hs_cfg_float(cfg, "model.initializer_range");
    }
    snprintf(out->attention, sizeof out->attention, "%s", hs_cfg_string(cfg, "attention"));
    out->padded_vocab_size = hs_bert_padded_vocab(out->vocab_size, multiple);
    out->from_file = *file != 0;
    hs_bert_config_check(out, where, key_prefix);
}
