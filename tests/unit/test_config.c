/* The experiment file as a user writes it: defaults, typed values, typos, out-of-range values,
 * `-o` overrides, list keys, the printed effective configuration, and the messages a user sees.
 * A user error ends the process (hs_die_all -> exit 1), so each error case runs in a forked child
 * whose stderr is captured and checked for the exact message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"

#ifndef HS_TOP_SRCDIR
#define HS_TOP_SRCDIR "."
#endif

/* ---- running a load in a child ------------------------------------------------------------------ */

static char child_out[16384];

/* Run fn(arg) in a child with stdout+stderr captured into child_out; the child's exit status, or -1
 * if it died from a signal. A child that returns from fn exits 0. */
static int run_in_child(void (*fn)(const void *), const void *arg) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        fn(arg);
        fflush(stdout);
        fflush(stderr);
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while ((got = read(fds[0], child_out + n, sizeof child_out - 1 - n)) > 0) n += (size_t)got;
    child_out[n] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

typedef struct {
    const char *text;
    int n;
    char *const *ov;
} load_args;

static void load_in_child(const void *arg) {
    const load_args *a = arg;
    hs_config_free(hs_config_load_string(a->text, "exp.cfg", a->n, a->ov));
}

/* Loading `text` (as "exp.cfg") with overrides must end with exit 1 and print `msg`. */
static void expect_load_error_ov(const char *text, int n, char *const *ov, const char *msg) {
    load_args a = {text, n, ov};
    int st = run_in_child(load_in_child, &a);
    if (st != 1 || !strstr(child_out, msg))
        fail_msg("expected exit 1 and the message\n  %s\ngot exit %d and:\n%s", msg, st, child_out);
}

static void expect_load_error(const char *text, const char *msg) { expect_load_error_ov(text, 0, NULL, msg); }

static void expect_override_error(const char *override, const char *msg) {
    char *ov[] = {(char *)override};
    expect_load_error_ov("", 1, ov, msg);
}

static hs_config *load(const char *text) { return hs_config_load_string(text, "exp.cfg", 0, NULL); }

/* ---- defaults ----------------------------------------------------------------------------------- */

/* An empty experiment file trains MNIST with HetSeq's defaults. */
static void test_empty_file_gives_documented_defaults(void **state) {
    (void)state;
    hs_config *c = load("");
    assert_string_equal(hs_cfg_string(c, "task"), "mnist");
    assert_string_equal(hs_cfg_string(c, "device"), "auto");
    assert_string_equal(hs_cfg_string(c, "precision"), "fp32");
    assert_int_equal(hs_cfg_int(c, "seed"), 19940802);
    assert_string_equal(hs_cfg_string(c, "data.valid_subset"), "valid");
    assert_true(hs_cfg_float(c, "data.mean") == 0.2860);
    assert_true(hs_cfg_float(c, "data.std") == 0.3530);
    assert_true(hs_cfg_float(c, "model.conv_dropout") == 0.25);
    assert_true(hs_cfg_float(c, "model.fc_dropout") == 0.5);
    assert_int_equal(hs_cfg_int(c, "model.hidden_size"), 768);
    assert_string_equal(hs_cfg_string(c, "optimizer.name"), "adadelta");
    assert_true(hs_cfg_float(c, "optimizer.lr") == 1.0);
    assert_true(hs_cfg_float(c, "optimizer.clip_norm") == 25.0);
    assert_true(hs_cfg_float(c, "optimizer.adam_eps") == 1e-8);
    assert_int_equal(hs_cfg_list_len(c, "optimizer.adam_betas"), 2);
    assert_true(hs_cfg_float_elem(c, "optimizer.adam_betas", 0) == 0.9);
    assert_true(hs_cfg_float_elem(c, "optimizer.adam_betas", 1) == 0.999);
    assert_string_equal(hs_cfg_string(c, "lr_scheduler.name"), "polynomial_decay");
    assert_int_equal(hs_cfg_int(c, "lr_scheduler.total_num_update"), 1000000);
    assert_int_equal(hs_cfg_int(c, "training.max_sentences"), 64);
    assert_int_equal(hs_cfg_list_len(c, "training.update_freq"), 1);
    assert_int_equal(hs_cfg_int_elem(c, "training.update_freq", 0), 1);
    assert_int_equal(hs_cfg_int(c, "training.validate_interval"), 1);
    assert_false(hs_cfg_bool(c, "training.disable_validation"));
    assert_true(hs_cfg_bool(c, "distributed.fast_stat_sync"));
    assert_int_equal(hs_cfg_int(c, "distributed.bucket_cap_mb"), 25);
    assert_string_equal(hs_cfg_string(c, "checkpoint.save_dir"), "checkpoints");
    assert_int_equal(hs_cfg_int(c, "checkpoint.keep_last"), 2);
    assert_int_equal(hs_cfg_int(c, "log.interval"), 10);
    assert_string_equal(hs_cfg_string(c, "log.metrics_file"), "metrics.jsonl");
    char buf[64];
    assert_string_equal(hs_cfg_origin(c, "optimizer.lr", buf, sizeof buf), "default");
    hs_config_free(c);
}

/* Keys the file does not mention keep their defaults next to the ones it sets. */
static void test_file_values_and_defaults_mix(void **state) {
    (void)state;
    hs_config *c = load("task = \"bert\";\n"
                        "optimizer: {\n"
                        "  name = \"lamb\";\n"
                        "  lr = 6e-3;\n"
                        "};\n"
                        "checkpoint: { no_save = true; keep_last = -1; };\n");
    assert_string_equal(hs_cfg_string(c, "task"), "bert");
    assert_string_equal(hs_cfg_string(c, "optimizer.name"), "lamb");
    assert_true(hs_cfg_float(c, "optimizer.lr") == 6e-3);
    assert_true(hs_cfg_float(c, "optimizer.weight_decay") == 0.0);
    assert_true(hs_cfg_bool(c, "checkpoint.no_save"));
    assert_int_equal(hs_cfg_int(c, "checkpoint.keep_last"), -1);
    char buf[64];
    assert_string_equal(hs_cfg_origin(c, "optimizer.lr", buf, sizeof buf), "exp.cfg:4");
    assert_string_equal(hs_cfg_origin(c, "task", buf, sizeof buf), "exp.cfg:1");
    hs_config_free(c);
}

/* ---- types -------------------------------------------------------------------------------------- */

/* `lr = 2;` and `weight_decay = 0;` are what users write; libconfig 1.5 calls them ints. */
static void test_int_literal_accepted_for_float(void **state) {
    (void)state;
    hs_config *c = load("optimizer: { lr = 2; weight_decay = 0; clip_norm = 100L; };");
    assert_true(hs_cfg_float(c, "optimizer.lr") == 2.0);
    assert_true(hs_cfg_float(c, "optimizer.weight_decay") == 0.0);
    assert_true(hs_cfg_float(c, "optimizer.clip_norm") == 100.0);
    hs_config_free(c);
}

static void test_wrong_types_are_reported(void **state) {
    (void)state;
    expect_load_error("optimizer: { lr = \"fast\"; };",
                      "exp.cfg:1: optimizer.lr: expected a number, found the string \"fast\"");
    expect_load_error("training: { max_sentences = 64.5; };",
                      "exp.cfg:1: training.max_sentences: expected an integer, found the number 64.5 (write a whole "
                      "number without a decimal point)");
    expect_load_error("training: { disable_validation = 1; };",
                      "exp.cfg:1: training.disable_validation: expected a boolean (true or false), found the integer 1");
    expect_load_error("task = mnist;", "exp.cfg:1: syntax error");
    expect_load_error("task = 3;", "exp.cfg:1: task: expected a string in double quotes, found the integer 3");
    expect_load_error("seed: { x = 1; };", "exp.cfg:1: seed: expected an integer, found a group { ... }");
    expect_load_error("optimizer = \"adam\";",
                      "exp.cfg:1: 'optimizer' is a group of settings, not a value; write optimizer: { key = value; ... };");
}

/* libconfig 1.5 truncates a literal beyond 32 bits unless it carries the L suffix. */
static void test_seed_beyond_32_bits_needs_L(void **state) {
    (void)state;
    expect_load_error("# comment 99999999999\nseed = 4294967295;",
                      "exp.cfg:2: the integer 4294967295 does not fit in 32 bits; libconfig needs an L suffix for "
                      "larger integers: write 4294967295L");
    expect_load_error("data: { num_file = -3000000000; };", "write -3000000000L");
    hs_config *c = load("seed = 4294967295L; data: { path = \"/x/99999999999\"; mean = 12345678901.5; };");
    assert_int_equal(hs_cfg_int(c, "seed"), 4294967295LL);
    hs_config_free(c);
    expect_load_error("seed = 4294967296L;",
                      "exp.cfg:1: seed = 4294967296 is out of range; allowed: 0 <= value <= 4294967295");
    /* libconfig 1.5 reads 0xFFFFFFFF as -1 and clamps or wraps beyond 64 bits even with L */
    expect_load_error("\nseed = 0xFFFFFFFF;", "exp.cfg:2: the integer 0xFFFFFFFF does not fit in 32 bits; libconfig "
                                              "needs an L suffix for larger integers: write 0xFFFFFFFFL");
    expect_load_error("model: { vocab_size = 99999999999999999999L; };",
                      "exp.cfg:1: the integer 99999999999999999999 is beyond 64 bits");
    expect_load_error("model: { vocab_size = 0x8000000000000000L; };", "the integer 0x8000000000000000 is beyond 64 bits");
    c = load("seed = 0xFFFFFFFFL; model: { vocab_size = 0x7FFFFFFF; hidden_size = 9223372036854775807L; };");
    assert_int_equal(hs_cfg_int(c, "seed"), 4294967295LL);
    assert_int_equal(hs_cfg_int(c, "model.vocab_size"), 2147483647);
    assert_int_equal(hs_cfg_int(c, "model.hidden_size"), INT64_MAX);
    hs_config_free(c);
}

/* ---- unknown keys ------------------------------------------------------------------------------- */

static void test_typo_suggests_the_key(void **state) {
    (void)state;
    expect_load_error("optimizer: {\n  name = \"adam\";\n  lrr = 0.1;\n};",
                      "exp.cfg:3: unknown key 'optimizer.lrr'; did you mean 'optimizer.lr'?");
    expect_load_error("training: { max_sentence = 8; };",
                      "exp.cfg:1: unknown key 'training.max_sentence'; did you mean 'training.max_sentences'?");
    /* a known key in the wrong group, and a group key at the top level */
    expect_load_error("training: { lr = 0.1; };", "unknown key 'training.lr'; did you mean 'optimizer.lr'?");
    expect_load_error("clip_norm = 1.0;", "unknown key 'clip_norm'; did you mean 'optimizer.clip_norm'?");
    expect_load_error("\n\noptimiser: { lr = 0.1; };", "exp.cfg:3: unknown group 'optimiser'; did you mean 'optimizer'?");
    /* nothing close: no suggestion, but still the key and the line */
    expect_load_error("\nzzzzzzzz = 1;", "exp.cfg:2: unknown key 'zzzzzzzz' (every key is listed in docs/configuration.md)");
}

/* ---- ranges and choices ------------------------------------------------------------------------- */

static void test_out_of_range_values(void **state) {
    (void)state;
    expect_load_error("optimizer: { lr = -0.5; };", "exp.cfg:1: optimizer.lr = -0.5 is out of range; allowed: value >= 0");
    expect_load_error("model: { conv_dropout = 1.0; };",
                      "model.conv_dropout = 1 is out of range; allowed: 0 <= value < 1");
    expect_load_error("training: { max_sentences = 0; };",
                      "training.max_sentences = 0 is out of range; allowed: value >= 1");
    expect_load_error("data: { std = 0.0; };", "data.std = 0 is out of range; allowed: value > 0");
    expect_load_error("checkpoint: { keep_last = -2; };", "checkpoint.keep_last = -2 is out of range; allowed: value >= -1");
    /* the bounds themselves are allowed */
    hs_config *c = load("model: { conv_dropout = 0.0; }; checkpoint: { keep_last = -1; }; seed = 0;");
    assert_true(hs_cfg_float(c, "model.conv_dropout") == 0.0);
    hs_config_free(c);
}

static void test_choices(void **state) {
    (void)state;
    expect_load_error("optimizer: { name = \"adamm\"; };",
                      "exp.cfg:1: optimizer.name = \"adamm\" is not allowed; did you mean \"adam\"? allowed: one of "
                      "\"adam\", \"adamw\", \"lamb\", \"adadelta\", \"sgd\"");
    expect_load_error("device = \"gpu\";",
                      "device = \"gpu\" is not allowed; did you mean \"cpu\"? allowed: one of \"auto\", \"cpu\", \"cuda\"");
    expect_load_error("device = \"accelerator\";",
                      "device = \"accelerator\" is not allowed; allowed: one of \"auto\", \"cpu\", \"cuda\"");
    expect_load_error("log: { format = \"\"; };", "log.format = \"\" is not allowed");
    hs_config *c = load("device = \"cpu\"; lr_scheduler: { name = \"poly_warmup\"; };");
    assert_string_equal(hs_cfg_string(c, "device"), "cpu");
    assert_string_equal(hs_cfg_string(c, "lr_scheduler.name"), "poly_warmup");
    hs_config_free(c);
}

/* ---- lists -------------------------------------------------------------------------------------- */

static void test_list_keys(void **state) {
    (void)state;
    hs_config *c = load("training: { update_freq = 4; };");
    assert_int_equal(hs_cfg_list_len(c, "training.update_freq"), 1);
    assert_int_equal(hs_cfg_int_elem(c, "training.update_freq", 0), 4);
    hs_config_free(c);

    c = load("training: { update_freq = [1, 2, 4]; }; optimizer: { adam_betas = [0.8, 0.99]; };");
    assert_int_equal(hs_cfg_list_len(c, "training.update_freq"), 3);
    assert_int_equal(hs_cfg_int_elem(c, "training.update_freq", 0), 1);
    assert_int_equal(hs_cfg_int_elem(c, "training.update_freq", 1), 2);
    assert_int_equal(hs_cfg_int_elem(c, "training.update_freq", 2), 4);
    assert_true(hs_cfg_float_elem(c, "optimizer.adam_betas", 0) == 0.8);
    assert_true(hs_cfg_float_elem(c, "optimizer.adam_betas", 1) == 0.99);
    hs_config_free(c);

    /* a libconfig list ( ) may mix int and float literals */
    c = load("optimizer: { adam_betas = (0, 0.5); };");
    assert_true(hs_cfg_float_elem(c, "optimizer.adam_betas", 0) == 0.0);
    assert_true(hs_cfg_float_elem(c, "optimizer.adam_betas", 1) == 0.5);
    hs_config_free(c);

    expect_load_error("optimizer: { adam_betas = [0.9]; };",
                      "exp.cfg:1: optimizer.adam_betas: expected a list of exactly 2 numbers, found 1");
    expect_load_error("optimizer: { adam_betas = [0.9, 1.0]; };",
                      "optimizer.adam_betas: element 2 is 1, out of range; allowed: 0 <= value < 1");
    expect_load_error("training: { update_freq = [1, 0]; };",
                      "training.update_freq: element 2 is 0, out of range; allowed: value >= 1");
    expect_load_error("training: { update_freq = [1.5]; };",
                      "training.update_freq: expected an integer or a list of integers, e.g. [1, 2, 4], found the number 1.5");
    expect_load_error("training: { update_freq = []; };", "training.update_freq: the list is empty");
    expect_load_error("training: { update_freq = \"4\"; };",
                      "training.update_freq: expected an integer or a list of integers, e.g. [1, 2, 4], found the string \"4\"");
}

/* ---- overrides ---------------------------------------------------------------------------------- */

static void test_overrides_win_and_are_typed(void **state) {
    (void)state;
    char *ov[] = {"optimizer.lr=0.5",          "optimizer.name=lamb",         "data.path=\"/scratch/my data\"",
                  "training.disable_validation=yes", "training.update_freq=[1, 2]", "optimizer.adam_betas=(0.5, 0.6)",
                  "seed=4294967295",            " training.max_sentences = 32 ", "optimizer.weight_decay=1"};
    int n = (int)(sizeof ov / sizeof ov[0]);
    hs_config *c = hs_config_load_string("optimizer: { lr = 2.0; name = \"adam\"; };", "exp.cfg", n, ov);
    assert_true(hs_cfg_float(c, "optimizer.lr") == 0.5);
    assert_string_equal(hs_cfg_string(c, "optimizer.name"), "lamb");
    assert_string_equal(hs_cfg_string(c, "data.path"), "/scratch/my data");
    assert_true(hs_cfg_bool(c, "training.disable_validation"));
    assert_int_equal(hs_cfg_list_len(c, "training.update_freq"), 2);
    assert_int_equal(hs_cfg_int_elem(c, "training.update_freq", 1), 2);
    assert_true(hs_cfg_float_elem(c, "optimizer.adam_betas", 1) == 0.6);
    assert_int_equal(hs_cfg_int(c, "seed"), 4294967295LL);
    assert_int_equal(hs_cfg_int(c, "training.max_sentences"), 32);
    assert_true(hs_cfg_float(c, "optimizer.weight_decay") == 1.0);
    char buf[128];
    assert_string_equal(hs_cfg_origin(c, "optimizer.lr", buf, sizeof buf), "-o optimizer.lr=0.5");
    hs_config_free(c);

    /* the last of two overrides of one key wins; a scalar override of a list key is a list of one */
    char *ov2[] = {"training.update_freq=8", "log.interval=5", "log.interval=7", "checkpoint.no_save=0"};
    c = hs_config_load_string("", "exp.cfg", 4, ov2);
    assert_int_equal(hs_cfg_list_len(c, "training.update_freq"), 1);
    assert_int_equal(hs_cfg_int_elem(c, "training.update_freq", 0), 8);
    assert_int_equal(hs_cfg_int(c, "log.interval"), 7);
    assert_false(hs_cfg_bool(c, "checkpoint.no_save"));
    hs_config_free(c);
}

/* An override's value is read by libconfig itself, so everything the file accepts works on the
 * command line: escapes, hex, the L suffix, ( ) lists, comments; plus the documented conveniences. */
static void test_override_values_are_libconfig_values(void **state) {
    (void)state;
    char *ov[] = {"data.path=\"/x/\\x41\\tb\"", "data.dict=\"a\" \"b\"",   "model.vocab_size=0x100",
                  "model.hidden_size=64L",       "optimizer.lr=6e-3 # NVIDIA's", "optimizer.adam_betas=(0, 0.5)",
                  "training.update_freq=[1, 4294967296]",                  "checkpoint.no_save=On",
                  "training.disable_validation=FALSE", "data.train_subset=part 1", "data.valid_subset=",
                  "checkpoint.keep_last=-1",     "log.interval=+3"};
    int n = (int)(sizeof ov / sizeof ov[0]);
    hs_config *c = hs_config_load_string("", "exp.cfg", n, ov);
    assert_string_equal(hs_cfg_string(c, "data.path"), "/x/A\tb");
    assert_string_equal(hs_cfg_string(c, "data.dict"), "ab");
    assert_int_equal(hs_cfg_int(c, "model.vocab_size"), 256);
    assert_int_equal(hs_cfg_int(c, "model.hidden_size"), 64);
    assert_true(hs_cfg_float(c, "optimizer.lr") == 6e-3);
    assert_true(hs_cfg_float_elem(c, "optimizer.adam_betas", 0) == 0.0);
    assert_true(hs_cfg_float_elem(c, "optimizer.adam_betas", 1) == 0.5);
    /* one literal beyond 32 bits: every integer of the list gets the L (libconfig refuses a mix) */
    assert_int_equal(hs_cfg_list_len(c, "training.update_freq"), 2);
    assert_int_equal(hs_cfg_int_elem(c, "training.update_freq", 0), 1);
    assert_int_equal(hs_cfg_int_elem(c, "training.update_freq", 1), 4294967296LL);
    assert_true(hs_cfg_bool(c, "checkpoint.no_save"));
    assert_false(hs_cfg_bool(c, "training.disable_validation"));
    assert_string_equal(hs_cfg_string(c, "data.train_subset"), "part 1"); /* bare: taken literally */
    assert_string_equal(hs_cfg_string(c, "data.valid_subset"), "");
    assert_int_equal(hs_cfg_int(c, "checkpoint.keep_last"), -1);
    assert_int_equal(hs_cfg_int(c, "log.interval"), 3);
    hs_config_free(c);
}

static void test_bad_overrides_are_reported(void **state) {
    (void)state;
    expect_override_error("optimizer.lr=fast", "-o optimizer.lr=fast: optimizer.lr: expected a number, found 'fast'");
    expect_override_error("optimizer.lrr=1", "-o optimizer.lrr=1: unknown key 'optimizer.lrr'; did you mean 'optimizer.lr'?");
    expect_override_error("lr=1", "-o lr=1: unknown key 'lr'; did you mean 'optimizer.lr'?");
    expect_override_error("training.max_sentences=0",
                          "-o training.max_sentences=0: training.max_sentences = 0 is out of range; allowed: value >= 1");
    expect_override_error("training.max_sentences=16.5",
                          "-o training.max_sentences=16.5: training.max_sentences: expected an integer, found the number "
                          "16.5 (write a whole number without a decimal point)");
    expect_override_error("optimizer.name=adamm", "-o optimizer.name=adamm: optimizer.name = \"adamm\" is not allowed; did you mean \"adam\"?");
    expect_override_error("optimizer.lr", "-o optimizer.lr: expected group.key=value");
    expect_override_error("=1", "-o =1: expected group.key=value");
    expect_override_error("optimizer=adam", "-o optimizer=adam: 'optimizer' is a group of settings; set one of its keys, e.g. -o optimizer.name=...");
    expect_override_error("training.disable_validation=maybe",
                          "-o training.disable_validation=maybe: training.disable_validation: expected a boolean "
                          "(true/false, yes/no, on/off, 1/0), found 'maybe'");
    expect_override_error("checkpoint.no_save=2",
                          "checkpoint.no_save: expected a boolean (true/false, yes/no, on/off, 1/0), found the integer 2");
    expect_override_error("training.update_freq=[1,,2]",
                          "-o training.update_freq=[1,,2]: training.update_freq: malformed list '[1,,2]'; expected an "
                          "integer or a list of integers, e.g. [1, 2, 4]");
    expect_override_error("training.update_freq=[1,x]", "training.update_freq: malformed list '[1,x]'");
    expect_override_error("training.update_freq=[1, 2.5]",
                          "training.update_freq: malformed list '[1, 2.5]' (the elements of [ ] must all be integers or "
                          "all have a decimal point");
    expect_override_error("training.update_freq=(1, 2.5)",
                          "training.update_freq: expected an integer or a list of integers, e.g. [1, 2, 4], found the "
                          "number 2.5 (write a whole number without a decimal point)");
    expect_override_error("training.update_freq=(1, \"2\")", "found a list of 2 element(s) with a non-number element");
    expect_override_error("training.update_freq=[]", "-o training.update_freq=[]: training.update_freq: the list is empty");
    expect_override_error("optimizer.adam_betas=[0, 0.5]",
                          "optimizer.adam_betas: malformed list '[0, 0.5]' (the elements of [ ] must all be integers or "
                          "all have a decimal point: write 0.0, not 0, or use ( ))");
    expect_override_error("optimizer.adam_betas=0.9", "optimizer.adam_betas: expected a list of exactly 2 numbers, found 1");
    expect_override_error("optimizer.lr=inf", "optimizer.lr: expected a number, found 'inf'");
    expect_override_error("optimizer.lr=", "-o optimizer.lr=: optimizer.lr: expected a number, found ''");
    expect_override_error("optimizer.lr=\"0.5\"",
                          "-o optimizer.lr=\"0.5\": optimizer.lr: expected a number, found the string \"0.5\" (leave out "
                          "the double quotes)");
    expect_override_error("optimizer.lr={ x = 1; }", "optimizer.lr: expected a number, found a group { ... }");
    expect_override_error("optimizer.lr=-1e400", "-o optimizer.lr=-1e400: optimizer.lr = -inf is out of range");
    /* one value only: the rest of the text cannot set another key */
    expect_override_error("optimizer.lr=0.5; seed = 3",
                          "-o optimizer.lr=0.5; seed = 3: optimizer.lr: expected a number, found '0.5; seed = 3'");
    expect_override_error("seed=3\n@include \"/etc/passwd\"", "seed: the value spans several lines; write it on one line");
    expect_override_error("data.path=\"unterminated", "data.path: malformed quoted string \"unterminated (write \"text\"");
    expect_override_error("data.path=\"a\"b", "data.path: malformed quoted string \"a\"b");
    expect_override_error("seed=99999999999999999999",
                          "-o seed=99999999999999999999: the integer 99999999999999999999 is beyond 64 bits");
    expect_override_error("checkpoint.keep_last=-9223372036854775809L", "the integer -9223372036854775809 is beyond 64 bits");
    expect_override_error("seed=4294967296", "-o seed=4294967296: seed = 4294967296 is out of range");
    /* the file's errors are found before the overrides are looked at */
    char *ov[] = {"optimizer.lr=0.1"};
    expect_load_error_ov("optimizer: { lr = -1.0; };", 1, ov, "exp.cfg:1: optimizer.lr = -1 is out of range");
}

/* ---- the effective configuration ---------------------------------------------------------------- */

/* Every key of a and b holds the same value (compared by type, floats bit for bit). */
static void assert_same_values(const hs_config *a, const hs_config *b) {
    for (int k = 0; k < hs_cfg_schema_count; k++) {
        const hs_cfg_key *key = &hs_cfg_schema[k];
        switch (key->type) {
        case HS_CFG_INT: assert_int_equal(hs_cfg_int(a, key->path), hs_cfg_int(b, key->path)); break;
        case HS_CFG_FLOAT:
            if (hs_cfg_float(a, key->path) != hs_cfg_float(b, key->path))
                fail_msg("%s: %.17g != %.17g", key->path, hs_cfg_float(a, key->path), hs_cfg_float(b, key->path));
            break;
        case HS_CFG_BOOL: assert_int_equal(hs_cfg_bool(a, key->path), hs_cfg_bool(b, key->path)); break;
        case HS_CFG_STRING: assert_string_equal(hs_cfg_string(a, key->path), hs_cfg_string(b, key->path)); break;
        case HS_CFG_INT_LIST:
        case HS_CFG_FLOAT_LIST:
            assert_int_equal(hs_cfg_list_len(a, key->path), hs_cfg_list_len(b, key->path));
            for (int e = 0; e < hs_cfg_list_len(a, key->path); e++) {
                if (key->type == HS_CFG_INT_LIST)
                    assert_int_equal(hs_cfg_int_elem(a, key->path, e), hs_cfg_int_elem(b, key->path, e));
                else
                    assert_true(hs_cfg_float_elem(a, key->path, e) == hs_cfg_float_elem(b, key->path, e));
            }
            break;
        }
    }
}

static void test_effective_config_round_trips(void **state) {
    (void)state;
    char *ov[] = {"data.path=\"/data/a \\\"quoted\\\" dir\\\\x\"", "data.dict=tab\there",
                  "optimizer.lr=0.1", "lr_scheduler.warmup_proportion=0.33333333333333331",
                  "seed=4294967295", "training.update_freq=[1,2,4]", "optimizer.adam_betas=[0.9, 0.98]",
                  "optimizer.adam_eps=1e-300", "lr_scheduler.power=3", "training.disable_validation=true"};
    hs_config *a = hs_config_load_string("task = \"bert\"; log: { format = \"json\"; };", "exp.cfg", 10, ov);
    assert_string_equal(hs_cfg_string(a, "data.path"), "/data/a \"quoted\" dir\\x");
    char *text = hs_config_to_string(a);
    /* grouped, one line per key, in libconfig syntax */
    assert_non_null(strstr(text, "\noptimizer: {\n"));
    assert_non_null(strstr(text, "  lr = 0.1;\n"));
    assert_non_null(strstr(text, "  warmup_proportion = 0.3333333333333333;\n"));
    assert_non_null(strstr(text, "  adam_eps = 1e-300;\n"));
    assert_non_null(strstr(text, "  power = 3.0;\n"));
    assert_non_null(strstr(text, "seed = 4294967295L;\n"));
    assert_non_null(strstr(text, "  update_freq = [1, 2, 4];\n"));
    hs_config *b = hs_config_load_string(text, "checkpoint", 0, NULL);
    assert_same_values(a, b);
    char *text2 = hs_config_to_string(b);
    assert_string_equal(text, text2);
    /* every schema key is printed */
    for (int k = 0; k < hs_cfg_schema_count; k++) {
        const char *path = hs_cfg_schema[k].path, *dot = strchr(path, '.');
        char line[160];
        snprintf(line, sizeof line, "%s%s = ", dot ? "  " : "", dot ? dot + 1 : path);
        if (!strstr(text, line)) fail_msg("key %s missing from the effective configuration:\n%s", path, text);
    }
    free(text);
    free(text2);
    hs_config_free(a);
    hs_config_free(b);
}

/* ---- files -------------------------------------------------------------------------------------- */

static char tmpdir[64];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void load_file_in_child(const void *arg) { hs_config_free(hs_config_load((const char *)arg, 0, NULL)); }

static void expect_file_error(const char *path, const char *msg) {
    int st = run_in_child(load_file_in_child, path);
    if (st != 1 || !strstr(child_out, msg))
        fail_msg("expected exit 1 and the message\n  %s\ngot exit %d and:\n%s", msg, st, child_out);
}

static void test_file_messages_name_file_and_line(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hs_test_config.XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    char good[128], bad[128], syntax[128], inc[128], incd[128], missing[128];
    snprintf(good, sizeof good, "%s/good.cfg", tmpdir);
    snprintf(bad, sizeof bad, "%s/bad.cfg", tmpdir);
    snprintf(syntax, sizeof syntax, "%s/syntax.cfg", tmpdir);
    snprintf(inc, sizeof inc, "%s/inc.cfg", tmpdir);
    snprintf(incd, sizeof incd, "%s/optim.cfg", tmpdir);
    snprintf(missing, sizeof missing, "%s/nope.cfg", tmpdir);

    write_file(good, "# an experiment\ntask = \"mnist\";\n\noptimizer: {\n  lr = 1;\n};\n");
    hs_config *c = hs_config_load(good, 0, NULL);
    char buf[256], want[256];
    snprintf(want, sizeof want, "%s:5", good);
    assert_string_equal(hs_cfg_origin(c, "optimizer.lr", buf, sizeof buf), want);
    hs_config_free(c);

    write_file(bad, "task = \"mnist\";\n\n\ntraining: {\n  max_sentences = 64;\n\n  update_freqq = 2;\n};\n");
    snprintf(want, sizeof want, "%s:7: unknown key 'training.update_freqq'; did you mean 'training.update_freq'?", bad);
    expect_file_error(bad, want);

    write_file(syntax, "task = \"mnist\";\noptimizer: {\n  lr = 1.0;\n  name = ;\n};\n");
    snprintf(want, sizeof want, "%s:4: syntax error", syntax);
    expect_file_error(syntax, want);

    snprintf(want, sizeof want, "cannot read experiment file '%s': No such file or directory", missing);
    expect_file_error(missing, want);
    snprintf(want, sizeof want, "cannot read experiment file '%s': it is a directory", tmpdir);
    expect_file_error(tmpdir, want);

    /* @include is relative to the experiment file; errors name the included file */
    write_file(incd, "optimizer: {\n  lr = \"x\";\n};\n");
    write_file(inc, "task = \"mnist\";\n@include \"optim.cfg\"\n");
    snprintf(want, sizeof want, "%s:2: optimizer.lr: expected a number, found the string \"x\"", incd);
    expect_file_error(inc, want);

    unlink(good);
    unlink(bad);
    unlink(syntax);
    unlink(inc);
    unlink(incd);
    rmdir(tmpdir);
}

/* ---- the schema and its documentation ----------------------------------------------------------- */

static void getter_of_wrong_type(const void *arg) {
    (void)arg;
    hs_config *c = load("");
    (void)hs_cfg_int(c, "optimizer.lr");
}

static void getter_of_unknown_key(const void *arg) {
    (void)arg;
    hs_config *c = load("");
    (void)hs_cfg_float(c, "optimizer.learning_rate");
}

/* Asking for a key the schema lacks, or with the wrong getter, is a bug: fatal, not a user error. */
static void test_getter_misuse_is_fatal(void **state) {
    (void)state;
    int st = run_in_child(getter_of_wrong_type, NULL);
    if (st != 2) fail_msg("expected exit 2, got %d:\n%s", st, child_out);
    assert_non_null(strstr(child_out, "hs_cfg_int(\"optimizer.lr\"): the key is a number"));
    st = run_in_child(getter_of_unknown_key, NULL);
    assert_int_equal(st, 2);
    assert_non_null(strstr(child_out, "hs_cfg_float(\"optimizer.learning_rate\"): no such key"));
}

static void test_schema_is_well_formed(void **state) {
    (void)state;
    assert_true(hs_cfg_schema_count > 60);
    for (int k = 0; k < hs_cfg_schema_count; k++) {
        const hs_cfg_key *key = &hs_cfg_schema[k];
        assert_non_null(key->doc);
        assert_true(strlen(key->doc) > 5);
        assert_ptr_equal(hs_cfg_schema_find(key->path), key);
        if (key->choices) assert_int_equal(key->type, HS_CFG_STRING);
        if (key->type == HS_CFG_BOOL || key->type == HS_CFG_STRING) assert_true(key->min > key->max);
        /* groups are contiguous, so the printed configuration follows the schema order */
        const char *dot = strchr(key->path, '.');
        if (k > 0 && dot) {
            const char *prev = hs_cfg_schema[k - 1].path, *pdot = strchr(prev, '.');
            int same = pdot && pdot - prev == dot - key->path && strncmp(prev, key->path, (size_t)(dot - key->path)) == 0;
            if (!same)
                for (int j = 0; j < k; j++)
                    if (strncmp(hs_cfg_schema[j].path, key->path, (size_t)(dot - key->path + 1)) == 0)
                        fail_msg("group of %s is split in the schema", key->path);
        }
    }
    assert_null(hs_cfg_schema_find("optimizer"));
    assert_null(hs_cfg_schema_find("optimizer.lrr"));
}

/* docs/configuration.md has a table row "| `path` | type | `default` | ..." for every key. */
static void test_every_key_is_documented(void **state) {
    (void)state;
    const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : HS_TOP_SRCDIR;
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/configuration.md", top);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    static char doc[1 << 18];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    static const char *const type_word[] = {"int", "float", "bool", "string", "float list", "int list"};
    for (int k = 0; k < hs_cfg_schema_count; k++) {
        const hs_cfg_key *key = &hs_cfg_schema[k];
        char row[256];
        snprintf(row, sizeof row, "\n| `%s` | %s | `%s` |", key->path, type_word[key->type], key->default_str);
        if (!strstr(doc, row)) fail_msg("docs/configuration.md lacks the row starting\n%s", row + 1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_file_gives_documented_defaults),
        cmocka_unit_test(test_file_values_and_defaults_mix),
        cmocka_unit_test(test_int_literal_accepted_for_float),
        cmocka_unit_test(test_wrong_types_are_reported),
        cmocka_unit_test(test_seed_beyond_32_bits_needs_L),
        cmocka_unit_test(test_typo_suggests_the_key),
        cmocka_unit_test(test_out_of_range_values),
        cmocka_unit_test(test_choices),
        cmocka_unit_test(test_list_keys),
        cmocka_unit_test(test_overrides_win_and_are_typed),
        cmocka_unit_test(test_override_values_are_libconfig_values),
        cmocka_unit_test(test_bad_overrides_are_reported),
        cmocka_unit_test(test_effective_config_round_trips),
        cmocka_unit_test(test_file_messages_name_file_and_line),
        cmocka_unit_test(test_getter_misuse_is_fatal),
        cmocka_unit_test(test_schema_is_well_formed),
        cmocka_unit_test(test_every_key_is_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
