/* The sampler gives exactly HetSeq's data order: numpy's legacy MT19937 shuffle of the batch list with
 * seed + epoch, round-robin rank shards padded with EMPTY micro-batches. Reference values come from the
 * HetSeq behaviour notes and from tests/fixtures/sampler_vectors.txt, which numpy itself generated
 * (tests/fixtures/make_sampler_vectors.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "data/sampler.h"

#define HETSEQ_SEED 19940802u

static FILE *open_fixture(void) {
    const char *src = getenv("top_srcdir");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/sampler_vectors.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open the fixture %s (set top_srcdir to the source tree)", path);
    return f;
}

static int64_t *shuffled_arange(int64_t n, uint32_t seed) {
    int64_t *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = i;
    hs_legacy_shuffle(x, n, sizeof *x, seed);
    return x;
}

/* ---- the generator itself ------------------------------------------------------------------------ */

static void mt19937_matches_the_reference_generator(void **state) {
    (void)state;
    /* Matsumoto & Nishimura's init_genrand(5489): first output 3499211612; the 10000th is 4123659995
     * (the value the C++ standard requires of std::mt19937). */
    hs_mt19937 r;
    hs_mt19937_seed(&r, 5489u);
    assert_int_equal(hs_mt19937_next(&r), 3499211612u);
    for (int i = 2; i < 10000; i++) hs_mt19937_next(&r);
    assert_int_equal(hs_mt19937_next(&r), 4123659995u);
}

static void interval_stays_in_range(void **state) {
    (void)state;
    hs_mt19937 r;
    hs_mt19937_seed(&r, 12345u);
    uint32_t maxes[] = {0, 1, 2, 3, 7, 8, 1000, 0x7fffffffu, 0x80000000u, 0xffffffffu};
    for (size_t m = 0; m < sizeof maxes / sizeof *maxes; m++)
        for (int k = 0; k < 200; k++) assert_true(hs_mt19937_interval(&r, maxes[m]) <= maxes[m]);
}

/* ---- permutations ------------------------------------------------------------------------------------ */

static void permutation_of_20_with_epoch_1_seed(void **state) {
    (void)state;
    const int64_t expect[20] = {11, 10, 17, 19, 16, 15, 6, 5, 18, 3, 4, 2, 14, 13, 0, 9, 8, 1, 7, 12};
    int64_t *x = shuffled_arange(20, 19940803u);
    for (int i = 0; i < 20; i++) assert_int_equal(x[i], expect[i]);
    free(x);
}

static void permutations_match_numpy_for_many_seeds_and_sizes(void **state) {
    (void)state;
    FILE *f = open_fixture();
    char kind[16];
    int checked = 0;
    while (fscanf(f, "%15s", kind) == 1) {
        if (kind[0] == '#' || strcmp(kind, "perm") != 0) {
            int c;
            while ((c = fgetc(f)) != '\n' && c != EOF) {}
            continue;
        }
        unsigned long long seed;
        long long n;
        assert_int_equal(fscanf(f, "%llu %lld", &seed, &n), 2);
        int64_t *x = shuffled_arange(n, (uint32_t)seed);
        for (long long i = 0; i < n; i++) {
            long long v;
            assert_int_equal(fscanf(f, "%lld", &v), 1);
            if (x[i] != v) fail_msg("seed %llu n %lld: element %lld is %lld, numpy has %lld", seed, n, i, (long long)x[i], v);
        }
        free(x);
        checked++;
    }
    fclose(f);
    assert_true(checked >= 50); /* 5 seeds x 10 sizes */
}

static void shuffle_is_independent_of_element_size(void **state) {
    (void)state;
    /* the permutation depends only on n and the seed: shuffling 24-byte records moves them like int64s */
    struct rec { int64_t id; double pad[2]; } recs[777];
    for (int i = 0; i < 777; i++) recs[i] = (struct rec){i, {-1.0 * i, 2.0 * i}};
    hs_legacy_shuffle(recs, 777, sizeof *recs, 4294967295u);
    int64_t *x = shuffled_arange(777, 4294967295u);
    for (int i = 0; i < 777; i++) {
        assert_int_equal(recs[i].id, x[i]);
        assert_true(recs[i].pad[1] == 2.0 * (double)x[i]);
    }
    free(x);
}

/* ---- shards ------------------------------------------------------------------------------------------ */

static void expect_shard(int64_t n, int64_t b, int w, int rank, int epoch, const hs_range *expect, int64_t len) {
    hs_sampler s;
    hs_sampler_init(&s, n, b, w, rank, HETSEQ_SEED, 1);
    assert_int_equal(hs_sampler_shard_len(&s), len);
    hs_range got[64];
    hs_sampler_epoch_shard(&s, epoch, got);
    for (int64_t j = 0; j < len; j++) {
        if (got[j].count != expect[j].count || (expect[j].count && got[j].first != expect[j].first))
            fail_msg("N=%lld B=%lld W=%d rank %d epoch %d: micro-batch %lld is %lld:%d, expected %lld:%d",
                     (long long)n, (long long)b, w, rank, epoch, (long long)j, (long long)got[j].first,
                     got[j].count, (long long)expect[j].first, expect[j].count);
    }
}

static void ten_samples_three_per_batch_three_ranks(void **state) {
    (void)state;
    /* frozen [[0,1,2],[3,4,5],[6,7,8],[9]]; epoch 1 order [[9],[6,7,8],[3,4,5],[0,1,2]] */
    const hs_range e1r0[] = {{9, 1}, {0, 3}}, e1r1[] = {{6, 3}, {0, 0}}, e1r2[] = {{3, 3}, {0, 0}};
    expect_shard(10, 3, 3, 0, 1, e1r0, 2);
    expect_shard(10, 3, 3, 1, 1, e1r1, 2);
    expect_shard(10, 3, 3, 2, 1, e1r2, 2);
    /* epoch 2: the shuffle happens to be the identity */
    const hs_range e2r0[] = {{0, 3}, {9, 1}}, e2r1[] = {{3, 3}, {0, 0}}, e2r2[] = {{6, 3}, {0, 0}};
    expect_shard(10, 3, 3, 0, 2, e2r0, 2);
    expect_shard(10, 3, 3, 1, 2, e2r1, 2);
    expect_shard(10, 3, 3, 2, 2, e2r2, 2);
}

static void thousand_samples_rank_2_of_3(void **state) {
    (void)state;
    const int64_t starts[11] = {160, 864, 480, 320, 640, 192, 352, 800, 288, 224, -1};
    hs_range expect[11];
    for (int j = 0; j < 11; j++) {
        expect[j].first = starts[j] < 0 ? 0 : starts[j];
        /* the last batch [992, 1000) holds 8 samples; every other one 32 */
        expect[j].count = starts[j] < 0 ? 0 : (starts[j] == 992 ? 8 : 32);
    }
    expect_shard(1000, 32, 3, 2, 1, expect, 11);
}

static void shards_match_numpy_reference(void **state) {
    (void)state;
    FILE *f = open_fixture();
    char kind[16];
    int checked = 0;
    while (fscanf(f, "%15s", kind) == 1) {
        if (kind[0] == '#' || strcmp(kind, "shard") != 0) {
            int c;
            while ((c = fgetc(f)) != '\n' && c != EOF) {}
            continue;
        }
        long long n, b;
        int w, epoch, rank;
        unsigned long long seed;
        assert_int_equal(fscanf(f, "%lld %lld %d %llu %d %d", &n, &b, &w, &seed, &epoch, &rank), 6);
        hs_sampler s;
        hs_sampler_init(&s, n, b, w, rank, (uint32_t)seed, 1);
        int64_t len = hs_sampler_shard_len(&s);
        hs_range *got = calloc((size_t)len, sizeof *got);
        assert_non_null(got);
        hs_sampler_epoch_shard(&s, epoch, got);
        for (int64_t j = 0; j < len; j++) {
            long long first;
            int count;
            if (fscanf(f, "%lld:%d", &first, &count) != 2) fail_msg("shard N=%lld W=%d: fixture shorter than Lk", n, w);
            if (got[j].count != count || (count && got[j].first != first))
                fail_msg("N=%lld B=%lld W=%d epoch %d rank %d: micro-batch %lld is %lld:%d, numpy gives %lld:%d", n, b,
                         w, epoch, rank, (long long)j, (long long)got[j].first, got[j].count, first, count);
        }
        int c; /* nothing may follow on the line: the shard length agrees too */
        while ((c = fgetc(f)) == ' ') {}
        assert_true(c == '\n' || c == EOF);
        free(got);
        checked++;
    }
    fclose(f);
    assert_true(checked >= 99); /* 10 cases x 3 epochs x every rank */
}

static void every_batch_is_read_exactly_once_for_any_world_size(void **state) {
    (void)state;
    hs_mt19937 pick;
    hs_mt19937_seed(&pick, 7u);
    for (int trial = 0; trial < 300; trial++) {
        int w = 1 + (int)hs_mt19937_interval(&pick, 15);
        int64_t b = 1 + hs_mt19937_interval(&pick, 40);
        int64_t nb_min = w;
        int64_t n = nb_min * b - (b - 1) + hs_mt19937_interval(&pick, 3000); /* ensures nb >= w */
        int shuffle = (int)hs_mt19937_interval(&pick, 1);
        int epoch = 1 + (int)hs_mt19937_interval(&pick, 5);
        int64_t nb = (n + b - 1) / b;
        int *seen = calloc((size_t)nb, sizeof *seen);
        assert_non_null(seen);
        int64_t empties = 0, len = -1;
        for (int k = 0; k < w; k++) {
            hs_sampler s;
            hs_sampler_init(&s, n, b, w, k, 1000u + (uint32_t)trial, shuffle);
            assert_int_equal(s.num_batches, nb);
            if (len < 0) len = hs_sampler_shard_len(&s);
            assert_int_equal(hs_sampler_shard_len(&s), len); /* the same on every rank */
            hs_range *r = calloc((size_t)len, sizeof *r);
            assert_non_null(r);
            hs_sampler_epoch_shard(&s, epoch, r);
            for (int64_t j = 0; j < len; j++) {
                if (r[j].count == 0) {
                    empties++;
                    assert_int_equal(j, len - 1); /* padding only at the end of a shard */
                    continue;
                }
                assert_int_equal(r[j].first % b, 0);
                int64_t batch = r[j].first / b;
                assert_true(batch >= 0 && batch < nb);
                int64_t expect_count = batch == nb - 1 ? n - batch * b : b;
                assert_int_equal(r[j].count, expect_count);
                seen[batch]++;
                if (!shuffle) assert_int_equal(batch, k + j * w); /* validation: batches in order */
            }
            free(r);
        }
        for (int64_t i = 0; i < nb; i++)
            if (seen[i] != 1) fail_msg("W=%d N=%lld B=%lld: batch %lld taken %d times", w, (long long)n, (long long)b, (long long)i, seen[i]);
        assert_int_equal(empties, len * w - nb);
        free(seen);
    }
}

static void updates_per_epoch_group_update_freq_micro_batches(void **state) {
    (void)state;
    hs_sampler s;
    hs_sampler_init(&s, 1000, 32, 3, 0, HETSEQ_SEED, 1); /* nb = 32, Lk = 11 */
    assert_int_equal(hs_sampler_shard_len(&s), 11);
    assert_int_equal(hs_sampler_updates_per_epoch(&s, 1), 11);
    assert_int_equal(hs_sampler_updates_per_epoch(&s, 2), 6); /* last update: one micro-batch */
    assert_int_equal(hs_sampler_updates_per_epoch(&s, 4), 3);
    assert_int_equal(hs_sampler_updates_per_epoch(&s, 11), 1);
    assert_int_equal(hs_sampler_updates_per_epoch(&s, 64), 1);
    hs_sampler_init(&s, 60000, 64, 4, 3, HETSEQ_SEED, 1); /* nb = 938, Lk = 235 */
    assert_int_equal(hs_sampler_shard_len(&s), 235);
    assert_int_equal(hs_sampler_updates_per_epoch(&s, 4), 59);
}

/* ---- user errors: one clear message, exit status 1 ------------------------------------------------- */

/* Runs hs_sampler_init in a child (it ends the process on a user error) and returns its stderr. */
static void expect_init_error(int64_t n, int64_t b, int w, const char *pattern) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        hs_sampler s;
        hs_sampler_init(&s, n, b, w, 0, HETSEQ_SEED, 1);
        _exit(0);
    }
    close(fds[1]);
    char msg[1024] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof msg - 1 && (r = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    if (!strstr(msg, pattern)) fail_msg("expected \"%s\" in the message, got: %s", pattern, msg);
}

static void impossible_batch_settings_are_user_errors(void **state) {
    (void)state;
    expect_init_error(100, 0, 1, "training.max_sentences must be >= 1");
    expect_init_error(100, -5, 2, "training.max_sentences must be >= 1");
    expect_init_error(0, 8, 1, "no samples");
    /* N = 10, B = 4: 3 batches cannot feed 4 ranks */
    expect_init_error(10, 4, 4, "more ranks (4) than batches (3)");
    expect_init_error(10, 4, 4, "lower training.max_sentences or use fewer ranks");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mt19937_matches_the_reference_generator),
        cmocka_unit_test(interval_stays_in_range),
        cmocka_unit_test(permutation_of_20_with_epoch_1_seed),
        cmocka_unit_test(permutations_match_numpy_for_many_seeds_and_sizes),
        cmocka_unit_test(shuffle_is_independent_of_element_size),
        cmocka_unit_test(ten_samples_three_per_batch_three_ranks),
        cmocka_unit_test(thousand_samples_rank_2_of_3),
        cmocka_unit_test(shards_match_numpy_reference),
        cmocka_unit_test(every_batch_is_read_exactly_once_for_any_world_size),
        cmocka_unit_test(updates_per_epoch_group_update_freq_micro_batches),
        cmocka_unit_test(impossible_batch_settings_are_user_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
