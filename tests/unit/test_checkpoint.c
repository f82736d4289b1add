/* Checkpoints as a user meets them: save a model with its Adam state, training position and config,
 * load it back bit for bit; load a checkpoint of another model and get an error naming the tensor;
 * survive a save that fails half-way (disk full) with the previous checkpoint intact; prune old
 * checkpoints the way HetSeq names them. Errors end the process (hs_die), so those cases run in a
 * forked child whose exit status and stderr are checked. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <ftw.h>
#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "train/checkpoint.h"
#include "util/check.h"

static char g_root[256]; /* scratch directory of this test run */

/* ---- helpers ---------------------------------------------------------------------------------- */

/* g_root/<fmt...>; the result lives until 4 more calls, so keep a copy of paths used longer. */
static char *path_in(const char *fmt, ...) {
    static char buf[4][512];
    static int next = 0;
    char *p = buf[next++ % 4];
    char rel[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    snprintf(p, 512, "%s/%s", g_root, rel);
    return p;
}

/* xorshift64: arbitrary 32-bit patterns, so every float class (normal, subnormal, ±0, ±inf, NaN
 * payloads) appears in the data. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t next_bits(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float bits_to_float(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The MNIST CNN's table shapes, small: padding follows every tensor (numel not a multiple of 16). */
static void declare_model(hs_params *p, int64_t fc_in, int with_extra) {
    const int64_t conv_w[4] = {4, 1, 3, 3}, conv_b[1] = {4}, fc_w[2] = {3, fc_in}, fc_b[1] = {3};
    memset(p, 0, sizeof *p);
    hs_params_declare(p, "conv1.weight", 4, conv_w, 1);
    hs_params_declare(p, "conv1.bias", 1, conv_b, 0);
    hs_params_declare(p, "fc.weight", 2, fc_w, 1);
    hs_params_declare(p, "fc.bias", 1, fc_b, 0);
    if (with_extra) {
        const int64_t extra[2] = {2, 2};
        hs_params_declare(p, "fc2.weight", 2, extra, 1);
    }
    hs_params_allocate(p, hs_backend_cpu());
}

/* Fill every tensor of `flat` (device) with random bit patterns plus the special values, and the
 * padding with a sentinel that must never reach the file. */
static void fill_random(const hs_params *p, float *flat) {
    float *host = calloc(p->total, sizeof(float));
    assert_non_null(host);
    for (size_t i = 0; i < p->total; i++) host[i] = -12345.0f; /* padding sentinel */
    static const float specials[] = {0.0f, -0.0f, FLT_MIN / 2, -FLT_MIN / 1024, 1.4e-45f, FLT_MIN, FLT_MAX,
                                     -FLT_MAX, INFINITY, -INFINITY, 1.0f / 3.0f};
    size_t k = 0;
    for (int t = 0; t < p->count; t++) {
        const hs_tensor_info *ti = &p->tensors[t];
        for (size_t j = 0; j < ti->numel; j++, k++)
            host[ti->offset + j] = k < sizeof specials / sizeof specials[0] ? specials[k] : bits_to_float(next_bits());
    }
    p->be->upload(p->be, flat, host, p->total * sizeof(float));
    free(host);
}

/* Tensors (not padding) of a and b are bitwise equal. */
static void assert_tensors_equal_bits(const hs_params *p, const float *a_dev, const float *b_dev) {
    float *a = calloc(p->total, sizeof(float)), *b = calloc(p->total, sizeof(float));
    assert_non_null(a);
    assert_non_null(b);
    p->be->download(p->be, a, a_dev, p->total * sizeof(float));
    p->be->download(p->be, b, b_dev, p->total * sizeof(float));
    for (int t = 0; t < p->count; t++) {
        const hs_tensor_info *ti = &p->tensors[t];
        if (memcmp(a + ti->offset, b + ti->offset, ti->numel * sizeof(float)) != 0)
            fail_msg("tensor %s differs after the round trip", ti->name);
    }
    free(a);
    free(b);
}

static void make_adam(hs_optimizer *o, hs_params *p, const char *name) {
    memset(o, 0, sizeof *o);
    o->name = name;
    o->params = p;
    o->n_states = 2;
    o->state_names[0] = "exp_avg";
    o->state_names[1] = "exp_avg_sq";
    o->state[0] = p->be->alloc(p->be, p->total * sizeof(float));
    o->state[1] = p->be->alloc(p->be, p->total * sizeof(float));
}

static void free_adam(hs_optimizer *o) {
    for (int s = 0; s < o->n_states; s++) o->params->be->free(o->params->be, o->state[s]);
}

static hs_train_state sample_state(void) {
    hs_train_state s;
    memset(&s, 0, sizeof s);
    s.epoch = 3;
    s.updates_in_epoch = 117;
    s.num_updates = 1055;
    s.end_of_epoch = 0;
    s.lr_base = 1e-3;
    s.lr = 0.1 / 3.0;
    s.meter_loss_sum = 1234.5678901234567;
    s.meter_sample_count = 67520;
    s.meter_gnorm_sum = 4.9406564584124654e-324; /* smallest double subnormal */
    s.meter_clip_count = -0.0;
    s.meter_updates = 1055;
    s.train_wall = 98.76;
    s.seed = 0xFEDCBA9876543210ull; /* above INT64_MAX: must stay unsigned */
    return s;
}

/* A config text longer than any fixed buffer, with UTF-8 and quotes. */
static char *long_config(void) {
    const char *line = "optimizer: { name = \"adam\"; lr = 1e-3; };  # Grüße, ε = 1e-8\n";
    size_t n = strlen(line), reps = 2000;
    char *s = malloc(n * reps + 1);
    assert_non_null(s);
    for (size_t i = 0; i < reps; i++) memcpy(s + i * n, line, n);
    s[n * reps] = '\0';
    return s;
}

/* Run fn(arg) in a child with stderr captured; returns the exit status (-signal if killed) and the
 * captured text in out. */
typedef void (*child_fn)(void *arg);
static int run_child(child_fn fn, void *arg, char *out, size_t out_size) {
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* cmocka catches crashes to report them; in the child a crash must end the child, not resume
         * the test run there. */
        static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGABRT};
        for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) signal(crash_signals[i], SIG_DFL);
        close(pipefd[0]);
        dup2(pipefd[1], STDERR_FILENO);
        fn(arg);
        _exit(0);
    }
    close(pipefd[1]);
    size_t used = 0;
    ssize_t r;
    while ((r = read(pipefd[0], out + used, out_size - 1 - used)) > 0) used += (size_t)r;
    out[used] = '\0';
    close(pipefd[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

static void assert_contains(const char *text, const char *needle) {
    if (!strstr(text, needle)) fail_msg("expected \"%s\" in the message:\n%s", needle, text);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- round trip --------------------------------------------------------------------------------- */

static void test_round_trip_is_bit_exact(void **unused) {
    (void)unused;
    hs_params src, dst;
    declare_model(&src, 5, 0);
    declare_model(&dst, 5, 0);
    hs_optimizer opt_src, opt_dst;
    make_adam(&opt_src, &src, "adam");
    make_adam(&opt_dst, &dst, "adam");
    fill_random(&src, src.data);
    fill_random(&src, opt_src.state[0]);
    fill_random(&src, opt_src.state[1]);
    opt_src.step = 1055;
    hs_train_state st = sample_state(), st_back;
    memset(&st_back, 0x5A, sizeof st_back);
    char *cfg = long_config(), *cfg_back = NULL;

    const char *dir = path_in("rt/nested/dir"); /* created on the fly, like mkdir -p */
    hs_checkpoint_save(dir, "checkpoint_last.h5", &src, &opt_src, &st, cfg);
    char final[600];
    snprintf(final, sizeof final, "%s/checkpoint_last.h5", dir);
    assert_true(hs_file_exists(final));
    char tmp[620];
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    assert_false(hs_file_exists(tmp)); /* renamed away */

    hs_checkpoint_load(final, &dst, &opt_dst, &st_back, &cfg_back);
    assert_tensors_equal_bits(&src, src.data, dst.data);
    assert_tensors_equal_bits(&src, opt_src.state[0], opt_dst.state[0]);
    assert_tensors_equal_bits(&src, opt_src.state[1], opt_dst.state[1]);
    assert_int_equal(opt_dst.step, 1055);
    assert_memory_equal(&st, &st_back, offsetof(hs_train_state, seed) + sizeof st.seed);
    assert_non_null(cfg_back);
    assert_string_equal(cfg, cfg_back);
    free(cfg_back);

    /* The padding of the destination was not touched: only tensors travel. */
    float pad;
    const hs_tensor_info *b = &dst.tensors[1];
    dst.be->download(dst.be, &pad, dst.data + b->offset + b->numel, sizeof pad);
    assert_true(pad == 0.0f);

    char *cfg_only = hs_checkpoint_read_config(final);
    assert_string_equal(cfg, cfg_only);
    free(cfg_only);

    free(cfg);
    free_adam(&opt_src);
    free_adam(&opt_dst);
    hs_params_free(&src);
    hs_params_free(&dst);
}

/* The file itself, read with the HDF5 library: names, shapes (no padding), types, attributes. */
static void test_layout_in_the_file(void **unused) {
    (void)unused;
    hs_params p;
    declare_model(&p, 5, 0);
    hs_optimizer opt;
    make_adam(&opt, &p, "adam");
    opt.step = 7;
    hs_train_state st = sample_state();
    hs_checkpoint_save(path_in("layout"), "checkpoint1.h5", &p, &opt, &st, "task = \"mnist\";\n");

    hid_t f = H5Fopen(path_in("layout/checkpoint1.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, "/model/conv1.weight", H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t s = H5Dget_space(d);
    hsize_t dims[8];
    assert_int_equal(H5Sget_simple_extent_ndims(s), 4);
    H5Sget_simple_extent_dims(s, dims, NULL);
    assert_true(dims[0] == 4 && dims[1] == 1 && dims[2] == 3 && dims[3] == 3);
    hid_t t = H5Dget_type(d);
    assert_true(H5Tequal(t, H5T_IEEE_F32LE) > 0);
    H5Tclose(t);
    H5Sclose(s);
    H5Dclose(d);

    d = H5Dopen2(f, "/optimizer/exp_avg_sq/fc.weight", H5P_DEFAULT);
    assert_true(d >= 0);
    s = H5Dget_space(d);
    assert_int_equal(H5Sget_simple_extent_npoints(s), 15);
    H5Sclose(s);
    H5Dclose(d);

    int64_t v = 0;
    hid_t a = H5Aopen_by_name(f, "/optimizer", "step", H5P_DEFAULT, H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    assert_int_equal(v, 7);
    a = H5Aopen(f, "version", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    assert_int_equal(v, 1);
    uint64_t seed = 0;
    a = H5Aopen_by_name(f, "/train_state", "seed", H5P_DEFAULT, H5P_DEFAULT);
    t = H5Aget_type(a);
    assert_true(H5Tequal(t, H5T_STD_U64LE) > 0);
    H5Tclose(t);
    H5Aread(a, H5T_NATIVE_UINT64, &seed);
    H5Aclose(a);
    assert_true(seed == 0xFEDCBA9876543210ull);
    assert_true(H5Aexists(f, "format") > 0);
    assert_true(H5Aexists(f, "hetseq_version") > 0);
    H5Fclose(f);

    free_adam(&opt);
    hs_params_free(&p);
}

/* A weights-only checkpoint (no optimizer) loads into a model alone. */
static void test_weights_only(void **unused) {
    (void)unused;
    hs_params src, dst;
    declare_model(&src, 5, 0);
    declare_model(&dst, 5, 0);
    fill_random(&src, src.data);
    hs_checkpoint_save(path_in("weights"), "checkpoint1.h5", &src, NULL, NULL, NULL);
    hs_checkpoint_load(path_in("weights/checkpoint1.h5"), &dst, NULL, NULL, NULL);
    assert_tensors_equal_bits(&src, src.data, dst.data);
    hs_params_free(&src);
    hs_params_free(&dst);
}

/* A task's resume state (e.g. Transformer-XL's memories: float32 arrays plus an int64 length) comes back
 * bit for bit with its names and shapes; a checkpoint without it reads as "none". */
static void test_task_state_round_trip(void **unused) {
    (void)unused;
    hs_params p;
    declare_model(&p, 5, 0);
    fill_random(&p, p.data);
    hs_task_state ts;
    memset(&ts, 0, sizeof ts);
    hs_task_state_array *mems = &ts.arrays[ts.count++];
    snprintf(mems->name, sizeof mems->name, "mems");
    mems->ndim = 4;
    const int64_t dims[4] = {3, 2, 5, 7}; /* [columns, layers, mem_len, d_model] */
    size_t n = 1;
    for (int d = 0; d < 4; d++) n *= (size_t)(mems->dims[d] = dims[d]);
    float *f;
    HS_ALLOC(f, n);
    for (size_t i = 0; i < n; i++) f[i] = bits_to_float(next_bits());
    mems->data = f;
    hs_task_state_array *len = &ts.arrays[ts.count++];
    snprintf(len->name, sizeof len->name, "mem_length");
    len->is_int64 = 1;
    len->ndim = 1;
    len->dims[0] = 1;
    int64_t *l;
    HS_ALLOC(l, 1);
    l[0] = -(INT64_C(1) << 40) + 3;
    len->data = l;
    hs_checkpoint_save_with_task(path_in("taskstate"), "checkpoint_1_2.h5", &p, NULL, NULL, "x = 1;", &ts);

    hs_task_state back;
    hs_checkpoint_read_task_state(path_in("taskstate/checkpoint_1_2.h5"), &back);
    assert_int_equal(back.count, 2);
    for (int i = 0; i < 2; i++) {
        const hs_task_state_array *a = NULL;
        for (int j = 0; j < back.count; j++)
            if (!strcmp(back.arrays[j].name, ts.arrays[i].name)) a = &back.arrays[j];
        assert_non_null(a);
        assert_int_equal(a->is_int64, ts.arrays[i].is_int64);
        assert_int_equal(a->ndim, ts.arrays[i].ndim);
        size_t m = 1;
        for (int d = 0; d < a->ndim; d++) {
            assert_int_equal(a->dims[d], ts.arrays[i].dims[d]);
            m *= (size_t)a->dims[d];
        }
        assert_memory_equal(a->data, ts.arrays[i].data, m * (a->is_int64 ? sizeof(int64_t) : sizeof(float)));
    }
    hs_task_state_free(&back);
    assert_int_equal(back.count, 0);

    hs_checkpoint_save(path_in("taskstate"), "checkpoint_1_3.h5", &p, NULL, NULL, "x = 1;");
    hs_checkpoint_read_task_state(path_in("taskstate/checkpoint_1_3.h5"), &back);
    assert_int_equal(back.count, 0);
    hs_task_state_free(&ts);
    hs_params_free(&p);
}

/* ---- user errors ---------------------------------------------------------------------------------- */

typedef struct load_case {
    const char *path;
    int64_t fc_in;
    int with_extra;
    const char *opt_name; /* NULL: load weights only */
    int with_state;
} load_case;

static void load_child(void *arg) {
    const load_case *c = arg;
    hs_params p;
    declare_model(&p, c->fc_in, c->with_extra);
    hs_optimizer opt;
    if (c->opt_name) make_adam(&opt, &p, c->opt_name);
    hs_train_state st;
    hs_checkpoint_load(c->path, &p, c->opt_name ? &opt : NULL, c->with_state ? &st : NULL, NULL);
}

static void save_reference(const char *dir, const char *name, int with_opt) {
    hs_params p;
    declare_model(&p, 5, 0);
    fill_random(&p, p.data);
    hs_optimizer opt;
    make_adam(&opt, &p, "adam");
    hs_train_state st = sample_state();
    hs_checkpoint_save(dir, name, &p, with_opt ? &opt : NULL, with_opt ? &st : NULL, "x = 1;");
    free_adam(&opt);
    hs_params_free(&p);
}

static void expect_load_error(load_case c, const char *n1, const char *n2) {
    char out[8192];
    int rc = run_child(load_child, &c, out, sizeof out);
    if (rc != 1) fail_msg("expected exit status 1, got %d; stderr:\n%s", rc, out);
    assert_contains(out, c.path);
    if (n1) assert_contains(out, n1);
    if (n2) assert_contains(out, n2);
}

static void test_loading_another_model_names_the_tensor(void **unused) {
    (void)unused;
    save_reference(path_in("err"), "checkpoint_last.h5", 1);
    const char *ck = path_in("err/checkpoint_last.h5");
    /* fc.weight [3,6] in the model, [3,5] in the file */
    expect_load_error((load_case){ck, 6, 0, NULL, 0}, "/model/fc.weight", "[3, 5]");
    /* the model has a tensor the checkpoint lacks */
    expect_load_error((load_case){ck, 5, 1, NULL, 0}, "/model/fc2.weight", "another model");
}

static void test_optimizer_mismatch_suggests_reset(void **unused) {
    (void)unused;
    save_reference(path_in("opt"), "checkpoint_last.h5", 1);
    save_reference(path_in("opt"), "weights.h5", 0);
    expect_load_error((load_case){path_in("opt/checkpoint_last.h5"), 5, 0, "sgd", 0}, "\"adam\"",
                      "checkpoint.reset_optimizer = true");
    expect_load_error((load_case){path_in("opt/weights.h5"), 5, 0, "adam", 0}, "no optimizer state",
                      "checkpoint.reset_optimizer = true");
    expect_load_error((load_case){path_in("opt/weights.h5"), 5, 0, NULL, 1}, "/train_state", NULL);
}

static void test_not_a_checkpoint(void **unused) {
    (void)unused;
    expect_load_error((load_case){path_in("nowhere/checkpoint_last.h5"), 5, 0, NULL, 0}, "does not exist", NULL);
    mkdir(path_in("bad"), 0777);
    write_file(path_in("bad/text.h5"), "this is not HDF5\n");
    expect_load_error((load_case){path_in("bad/text.h5"), 5, 0, NULL, 0}, "not an HDF5 file", NULL);
    hid_t f = H5Fcreate(path_in("bad/plain.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    H5Fclose(f);
    expect_load_error((load_case){path_in("bad/plain.h5"), 5, 0, NULL, 0}, "not a hetseq checkpoint", NULL);
}

/* ---- atomic save ---------------------------------------------------------------------------------- */

typedef struct save_case {
    const char *dir;
    int64_t file_limit; /* > 0: RLIMIT_FSIZE in bytes, a disk that fills up mid-write */
} save_case;

static void save_child(void *arg) {
    const save_case *c = arg;
    if (c->file_limit > 0) {
        struct rlimit lim = {(rlim_t)c->file_limit, (rlim_t)c->file_limit};
        signal(SIGXFSZ, SIG_IGN); /* write(2) then fails with EFBIG, like ENOSPC */
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(99);
    }
    hs_params p;
    declare_model(&p, 4000, 0); /* ~48 KB of weights: larger than the limit */
    fill_random(&p, p.data);
    hs_checkpoint_save(c->dir, "checkpoint_last.h5", &p, NULL, NULL, "new");
}

static void test_failed_save_keeps_the_previous_checkpoint(void **unused) {
    (void)unused;
    hs_params good, back;
    declare_model(&good, 5, 0);
    declare_model(&back, 5, 0);
    fill_random(&good, good.data);
    char dir[512], final[512];
    strcpy(dir, path_in("atomic"));
    strcpy(final, path_in("atomic/checkpoint_last.h5"));
    hs_checkpoint_save(dir, "checkpoint_last.h5", &good, NULL, NULL, "old");

    /* 1. the disk fills up half-way through the new checkpoint */
    char out[8192];
    int rc = run_child(save_child, &(save_case){dir, 16384}, out, sizeof out);
    if (rc == 0 || rc == 99) fail_msg("the save under a 16 KiB file limit should fail; status %d:\n%s", rc, out);
    hs_checkpoint_load(final, &back, NULL, NULL, NULL);
    assert_tensors_equal_bits(&good, good.data, back.data);
    char *cfg = hs_checkpoint_read_config(final);
    assert_string_equal(cfg, "old");
    free(cfg);

    /* 2. the temporary file cannot even be created */
    char tmp[512];
    strcpy(tmp, path_in("atomic/checkpoint_last.h5.tmp"));
    unlink(tmp);
    assert_int_equal(mkdir(tmp, 0777), 0);
    rc = run_child(save_child, &(save_case){dir, 0}, out, sizeof out);
    assert_true(rc != 0);
    cfg = hs_checkpoint_read_config(final);
    assert_string_equal(cfg, "old");
    free(cfg);
    rmdir(tmp);

    /* 3. the directory cannot be created: a clear message that names it */
    write_file(path_in("atomic/a-file"), "");
    char bad_dir[512];
    strcpy(bad_dir, path_in("atomic/a-file/checkpoints"));
    rc = run_child(save_child, &(save_case){bad_dir, 0}, out, sizeof out);
    assert_int_equal(rc, 1);
    assert_contains(out, bad_dir);
    assert_contains(out, "checkpoint.save_dir");

    /* 4. a read-only directory (permissions do not bind root, so only as a normal user) */
    if (geteuid() != 0) {
        char ro[512];
        strcpy(ro, path_in("atomic-ro"));
        hs_checkpoint_save(ro, "checkpoint_last.h5", &good, NULL, NULL, "old");
        assert_int_equal(chmod(ro, 0555), 0);
        rc = run_child(save_child, &(save_case){ro, 0}, out, sizeof out);
        chmod(ro, 0755);
        assert_int_equal(rc, 1);
        assert_contains(out, ro);
        assert_contains(out, "not writable");
        cfg = hs_checkpoint_read_config(path_in("atomic-ro/checkpoint_last.h5"));
        assert_string_equal(cfg, "old");
        free(cfg);
    }

    /* and a good save afterwards replaces it */
    rc = run_child(save_child, &(save_case){dir, 0}, out, sizeof out);
    assert_int_equal(rc, 0);
    cfg = hs_checkpoint_read_config(final);
    assert_string_equal(cfg, "new");
    free(cfg);
    hs_params_free(&good);
    hs_params_free(&back);
}

/* ---- pruning -------------------------------------------------------------------------------------- */

static void test_prune_keeps_the_newest_of_each_kind(void **unused) {
    (void)unused;
    char dir[512];
    strcpy(dir, path_in("prune"));
    mkdir(dir, 0777);
    static const char *const all[] = {
        "checkpoint1.h5", "checkpoint2.h5", "checkpoint5.h5", "checkpoint10.h5", /* 10 > 5 numerically */
        "checkpoint_1_100.h5", "checkpoint_2_250.h5", "checkpoint_2_300.h5", "checkpoint_3_50.h5",
        "checkpoint_last.h5", "checkpoint_last.h5.tmp", "checkpoint3.h5.tmp", "checkpointx.h5",
        "checkpoint_4.h5", "checkpoint7.pt", "notes.txt",
    };
    const int n_all = (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < n_all; i++) write_file(path_in("prune/%s", all[i]), "x");

    hs_checkpoint_prune(dir, 0); /* keep all */
    for (int i = 0; i < n_all; i++) assert_true(hs_file_exists(path_in("prune/%s", all[i])));

    hs_checkpoint_prune(dir, 2);
    static const char *const gone[] = {"checkpoint1.h5", "checkpoint2.h5", "checkpoint_1_100.h5",
                                       "checkpoint_3_50.h5"};
    for (int i = 0; i < n_all; i++) {
        int expect_gone = 0;
        for (size_t g = 0; g < sizeof gone / sizeof gone[0]; g++) expect_gone |= strcmp(all[i], gone[g]) == 0;
        if (hs_file_exists(path_in("prune/%s", all[i])) == expect_gone)
            fail_msg("%s should %s", all[i], expect_gone ? "be deleted" : "survive");
    }
}

static void test_file_exists(void **unused) {
    (void)unused;
    mkdir(path_in("exists"), 0777);
    write_file(path_in("exists/f"), "x");
    assert_true(hs_file_exists(path_in("exists/f")));
    assert_false(hs_file_exists(path_in("exists")));
    assert_false(hs_file_exists(path_in("exists/none")));
    assert_false(hs_file_exists(NULL));
}

/* ---- setup ---------------------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **unused) {
    (void)unused;
    const char *base = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/hetseq-test-checkpoint.XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(g_root) ? 0 : -1;
}

static int teardown(void **unused) {
    (void)unused;
    return nftw(g_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_is_bit_exact),
        cmocka_unit_test(test_layout_in_the_file),
        cmocka_unit_test(test_weights_only),
        cmocka_unit_test(test_task_state_round_trip),
        cmocka_unit_test(test_loading_another_model_names_the_tensor),
        cmocka_unit_test(test_optimizer_mismatch_suggests_reset),
        cmocka_unit_test(test_not_a_checkpoint),
        cmocka_unit_test(test_failed_save_keeps_the_previous_checkpoint),
        cmocka_unit_test(test_prune_keeps_the_newest_of_each_kind),
        cmocka_unit_test(test_file_exists),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
