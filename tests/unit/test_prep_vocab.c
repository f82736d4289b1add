/* The vocabulary learner behind `hetseq prep vocab`: a hand-worked example (the classic low/lower/
 * newest/widest corpus, every merge derived on paper), and agreement with a plain re-implementation
 * that recounts every pair from scratch before each merge (so the incremental pair counts, the word
 * index and the lazy heap are checked against the definition) on pseudo-random corpora full of ties
 * and repeats ("aaaa"). Also the word-count table: counting, packing, merging and its byte order, and
 * the string table under it (util/strtab.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prep/vocab_learn.h"
#include "prep/word_counts.h"
#include "util/strtab.h"

static hs_learned_vocab learn(const hs_word_count *w, size_t n, int size, uint64_t min_freq, int limit) {
    hs_vocab_learn_opts o = {.size = size, .min_frequency = min_freq, .limit_alphabet = limit};
    hs_learned_vocab v;
    assert_int_equal(hs_vocab_learn(w, n, &o, &v), 0);
    return v;
}

/* ---- the hand-worked example ------------------------------------------------------------------------- */

/* low x5, lower x2, newest x6, widest x3. Ids: specials 0-4, d e i l n o r s t w = 5-14, ##d ##e ##i ##o
 * ##r ##s ##t ##w = 15-22. Pair counts: (##e,##s) 9 and (##s,##t) 9 tie -> smaller ids (16,20) first:
 * ##es; then (##es,##t) 9: ##est; then (l,##o) 7 beats (##o,##w) 7 on ids: lo; (lo,##w) 7: low; then
 * the 6s (n,##e) (##e,##w) (##w,##est): ne; (##w,##est) 6 before (ne,##w) 6 on ids: ##west; newest; the
 * 3s: wi (14,17) first, then ##dest (15,24) before (wi,##d) (30,15), widest; the 2s: ##er, lower. */
static const char *const expected_example[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "d",   "e",      "i",      "l",     "n",      "o",  "r",
    "s",     "t",     "w",     "##d",   "##e",    "##i", "##o",    "##r",    "##s",   "##t",    "##w", "##es",
    "##est", "lo",    "low",   "ne",    "##west", "newest", "wi", "##dest", "widest", "##er", "lower"};
#define N_EXPECTED ((int)(sizeof expected_example / sizeof *expected_example))

static const hs_word_count example_words[] = {
    {"low", 3, 5}, {"lower", 5, 2}, {"newest", 6, 6}, {"widest", 6, 3}};

static void worked_example_gives_the_merges_derived_by_hand(void **state) {
    (void)state;
    hs_learned_vocab v = learn(example_words, 4, 100, 1, 0);
    assert_int_equal(v.count, N_EXPECTED); /* every word is one token: no pair left */
    assert_int_equal(v.pairs_ran_out, 1);
    assert_int_equal(v.base, 23);
    assert_int_equal(v.alphabet, 10);
    for (int i = 0; i < N_EXPECTED; i++) assert_string_equal(v.tokens[i], expected_example[i]);
    assert_int_equal(v.last_count, 2);
    hs_learned_vocab_free(&v);
}

static void size_stops_the_merging_exactly(void **state) {
    (void)state;
    hs_learned_vocab v = learn(example_words, 4, 30, 1, 0);
    assert_int_equal(v.count, 30);
    assert_int_equal(v.pairs_ran_out, 0);
    for (int i = 0; i < 30; i++) assert_string_equal(v.tokens[i], expected_example[i]);
    hs_learned_vocab_free(&v);
}

static void min_frequency_stops_before_rarer_pairs(void **state) {
    (void)state;
    /* pairs of count 3 (wi, ##dest, widest) and 2 are not merged at min_frequency 4 */
    hs_learned_vocab v = learn(example_words, 4, 100, 4, 0);
    assert_int_equal(v.count, 30); /* up to "newest" */
    assert_string_equal(v.tokens[29], "newest");
    assert_int_equal(v.pairs_ran_out, 1);
    hs_learned_vocab_free(&v);
}

static void size_below_the_alphabet_is_refused(void **state) {
    (void)state;
    hs_vocab_learn_opts o = {.size = 22, .min_frequency = 1};
    hs_learned_vocab v;
    assert_int_equal(hs_vocab_learn(example_words, 4, &o, &v), -1);
    assert_int_equal(v.base, 23);
    assert_null(v.tokens);
}

static void limit_alphabet_keeps_the_most_frequent_characters(void **state) {
    (void)state;
    /* character counts: l 7, o 7, w 16, e 17, r 2, n 6, s 9, t 9, i 3, d 3. Keeping 8 drops r and one
     * of the two 3s: ties keep the lower code point, so d stays and i goes. */
    hs_learned_vocab v = learn(example_words, 4, 100, 1, 8);
    assert_int_equal(v.alphabet, 8);
    assert_int_equal(v.alphabet_seen, 10);
    const char *alphabet[8] = {"d", "e", "l", "n", "o", "s", "t", "w"};
    for (int i = 0; i < 8; i++) assert_string_equal(v.tokens[5 + i], alphabet[i]);
    for (int i = 0; i < v.count; i++) { /* dropped characters vanish from the words */
        assert_null(strchr(v.tokens[i], 'r'));
        assert_null(strchr(v.tokens[i], 'i'));
    }
    int wdest = 0, lowe = 0; /* "widest" and "lower" without i and r, merged to one token each */
    for (int i = 0; i < v.count; i++) {
        wdest |= !strcmp(v.tokens[i], "wdest");
        lowe |= !strcmp(v.tokens[i], "lowe");
    }
    assert_true(wdest && lowe);
    hs_learned_vocab_free(&v);
}

/* ---- agreement with the definition -------------------------------------------------------------------- */

/* Plain learner over ASCII words: recounts all pairs before every merge. */
typedef struct naive_vocab {
    char **tok;
    int n;
} naive_vocab;

static int naive_id(naive_vocab *v, const char *s) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->tok[i], s)) return i;
    return -1;
}

static int naive_add(naive_vocab *v, const char *s) {
    int id = naive_id(v, s);
    if (id >= 0) return id;
    v->tok = realloc(v->tok, (size_t)(v->n + 1) * sizeof *v->tok);
    v->tok[v->n] = strdup(s);
    return v->n++;
}

static naive_vocab naive_learn(const hs_word_count *w, size_t n, int size, uint64_t min_freq) {
    naive_vocab v = {0};
    for (int k = 0; k < HS_VOCAB_N_SPECIAL; k++) naive_add(&v, hs_vocab_special_tokens[k]);
    int first[128] = {0}, later[128] = {0};
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < w[i].len; j++) (j ? later : first)[(int)w[i].word[j]] = 1;
    char buf[4];
    for (int c = 1; c < 128; c++)
        if (first[c] || later[c]) {
            snprintf(buf, sizeof buf, "%c", c);
            naive_add(&v, buf);
        }
    for (int c = 1; c < 128; c++)
        if (later[c]) {
            snprintf(buf, sizeof buf, "##%c", c);
            naive_add(&v, buf);
        }
    int **sym = calloc(n, sizeof *sym), *len = calloc(n, sizeof *len);
    for (size_t i = 0; i < n; i++) {
        sym[i] = calloc(w[i].len + 1, sizeof **sym);
        for (uint32_t j = 0; j < w[i].len; j++) {
            snprintf(buf, sizeof buf, j ? "##%c" : "%c", w[i].word[j]);
            sym[i][len[i]++] = naive_id(&v, buf);
        }
    }
    while (v.n < size) {
        /* count every pair: a dense table over the ids so far */
        int64_t *count = calloc((size_t)v.n * (size_t)v.n, sizeof *count);
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j + 1 < len[i]; j++) count[(size_t)sym[i][j] * (size_t)v.n + (size_t)sym[i][j + 1]] += (int64_t)w[i].count;
        int64_t best = 0;
        size_t best_at = 0;
        for (size_t k = 0; k < (size_t)v.n * (size_t)v.n; k++) /* row-major: ties go to smaller (x, y) */
            if (count[k] > best) best = count[k], best_at = k;
        free(count);
        if (best == 0 || (uint64_t)best < min_freq) break;
        int x = (int)(best_at / (size_t)v.n), y = (int)(best_at % (size_t)v.n);
        char joined[256];
        snprintf(joined, sizeof joined, "%s%s", v.tok[x], v.tok[y] + 2);
        int z = naive_add(&v, joined);
        for (size_t i = 0; i < n; i++) {
            int o = 0;
            for (int j = 0; j < len[i];) {
                if (j + 1 < len[i] && sym[i][j] == x && sym[i][j + 1] == y) sym[i][o++] = z, j += 2;
                else sym[i][o++] = sym[i][j++];
            }
            len[i] = o;
        }
    }
    for (size_t i = 0; i < n; i++) free(sym[i]);
    free(sym);
    free(len);
    return v;
}

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Words over a few letters with skewed counts: many equal counts (ties) and runs like "aaab". */
static hs_word_counts *random_corpus(uint32_t seed, int n_words, int letters) {
    hs_word_counts *wc = hs_word_counts_new();
    char word[16];
    for (int i = 0; i < n_words; i++) {
        int len = 1 + (int)(lcg(&seed) % 9);
        for (int j = 0; j < len; j++) {
            /* repeat the previous letter often, to make overlapping pairs */
            word[j] = (j > 0 && lcg(&seed) % 3 == 0) ? word[j - 1] : (char)('a' + lcg(&seed) % (uint32_t)letters);
        }
        hs_word_counts_add(wc, word, (size_t)len, 1 + lcg(&seed) % 4);
    }
    return wc;
}

static void incremental_counts_agree_with_recounting_from_scratch(void **state) {
    (void)state;
    const struct {
        uint32_t seed;
        int words, letters, size;
        uint64_t min_freq;
    } cases[] = {{1, 300, 4, 400, 1}, {2, 500, 6, 300, 2}, {3, 200, 3, 1000, 1}, {4, 800, 8, 250, 3}, {5, 60, 2, 500, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        hs_word_counts *wc = random_corpus(cases[c].seed, cases[c].words, cases[c].letters);
        size_t n;
        hs_word_count *words = hs_word_counts_sorted(wc, &n);
        hs_learned_vocab v = learn(words, n, cases[c].size, cases[c].min_freq, 0);
        naive_vocab ref = naive_learn(words, n, cases[c].size, cases[c].min_freq);
        if (v.count != ref.n) fail_msg("case %zu: %d tokens, the recounting learner %d", c, v.count, ref.n);
        for (int i = 0; i < ref.n; i++)
            if (strcmp(v.tokens[i], ref.tok[i]))
                fail_msg("case %zu: token %d is \"%s\", the recounting learner has \"%s\"", c, i, v.tokens[i], ref.tok[i]);
        assert_true(v.merges > 20);

        /* the same words in another order learn the same vocabulary */
        for (size_t i = n; i > 1; i--) {
            uint32_t s = (uint32_t)(i * 2654435761u);
            size_t j = lcg(&s) % i;
            hs_word_count t = words[i - 1];
            words[i - 1] = words[j];
            words[j] = t;
        }
        hs_learned_vocab v2 = learn(words, n, cases[c].size, cases[c].min_freq, 0);
        assert_int_equal(v2.count, v.count);
        for (int i = 0; i < v.count; i++) assert_string_equal(v2.tokens[i], v.tokens[i]);

        hs_learned_vocab_free(&v2);
        hs_learned_vocab_free(&v);
        for (int i = 0; i < ref.n; i++) free(ref.tok[i]);
        free(ref.tok);
        free(words);
        hs_word_counts_free(wc);
    }
}

static void multibyte_characters_are_single_symbols(void **state) {
    (void)state;
    /* "été" x3 and "thé" x2; é is 2 bytes but one character. Alphabet by code point: h t é (ids 5-7),
     * then ##h ##t ##é (8-10). Pairs: (é,##t) 3 and (##t,##é) 3 tie, and (7,9) < (9,10): "ét" first. */
    hs_word_count w[] = {{"\xc3\xa9t\xc3\xa9", 5, 3}, {"th\xc3\xa9", 4, 2}};
    hs_learned_vocab v = learn(w, 2, 12, 1, 0);
    const char *expected[] = {"h", "t", "\xc3\xa9", "##h", "##t", "##\xc3\xa9", "\xc3\xa9t"};
    for (int i = 0; i < 7; i++) assert_string_equal(v.tokens[5 + i], expected[i]);
    hs_learned_vocab_free(&v);
}

/* ---- word counts ------------------------------------------------------------------------------------- */

static void word_counts_add_pack_merge_and_sort(void **state) {
    (void)state;
    hs_word_counts *a = hs_word_counts_new(), *b = hs_word_counts_new();
    char word[32];
    for (int i = 0; i < 5000; i++) { /* grows the table several times */
        snprintf(word, sizeof word, "w%d", i % 1700);
        hs_word_counts_add(a, word, strlen(word), 1);
    }
    hs_word_counts_add(b, "w5", 2, 10);
    hs_word_counts_add(b, "zz", 2, 7);
    hs_word_counts_add(b, "", 0, 1);
    assert_int_equal(hs_word_counts_distinct(a), 1700);
    assert_int_equal(hs_word_counts_total(a), 5000);

    char *buf;
    size_t bytes;
    hs_word_counts_pack(b, &buf, &bytes);
    assert_int_equal(hs_word_counts_add_packed(a, buf, bytes - 1), -1); /* a cut record: nothing added */
    free(buf);
    assert_int_equal(hs_word_counts_total(a), 5000);
    hs_word_counts *c = hs_word_counts_new();
    hs_word_counts_pack(a, &buf, &bytes);
    assert_int_equal(hs_word_counts_add_packed(c, buf, bytes), 0);
    free(buf);
    hs_word_counts_pack(b, &buf, &bytes);
    assert_int_equal(hs_word_counts_add_packed(c, buf, bytes), 0);
    free(buf);
    assert_int_equal(hs_word_counts_distinct(c), 1702);
    assert_int_equal(hs_word_counts_total(c), 5018);

    size_t n;
    hs_word_count *s = hs_word_counts_sorted(c, &n);
    assert_int_equal(n, 1702);
    assert_int_equal(s[0].len, 0);               /* "" first */
    assert_memory_equal(s[1].word, "w0", 2);     /* then w0, w1, w10, w100, ... */
    assert_memory_equal(s[2].word, "w1", 2);
    assert_int_equal(s[2].len, 2);
    assert_memory_equal(s[3].word, "w10", 3);
    assert_memory_equal(s[n - 1].word, "zz", 2);
    for (size_t i = 0; i < n; i++)
        if (s[i].len == 2 && !memcmp(s[i].word, "w5", 2)) assert_int_equal(s[i].count, 3 + 10); /* 5000/1700 */
    free(s);
    hs_word_counts_free(a);
    hs_word_counts_free(b);
    hs_word_counts_free(c);
}

/* The string table under the word tables: numbers in order of first insertion, lookups without adding,
 * counts, byte strings that are prefixes of one another or hold a NUL, and growth far past the first
 * slot array, entry array and arena (every string still found with its number and bytes). */
static void string_table_numbers_counts_and_growth(void **state) {
    (void)state;
    hs_strtab *t = hs_strtab_new();
    assert_int_equal(hs_strtab_find(t, "ab", 2, 0), -1);
    assert_int_equal(hs_strtab_find(t, "ab", 2, 1), 0);
    assert_int_equal(hs_strtab_find(t, "a", 1, 1), 1);
    assert_int_equal(hs_strtab_find(t, "a\0b", 3, 1), 2);
    assert_int_equal(hs_strtab_find(t, "", 0, 1), 3);
    assert_int_equal(hs_strtab_find(t, "ab", 2, 1), 0);
    assert_int_equal(hs_strtab_find(t, "a", 1, 0), 1);
    assert_int_equal(hs_strtab_find(t, "a\0c", 3, 0), -1);
    hs_strtab_add_count(t, 1, 3);
    hs_strtab_add_count(t, 1, 4);
    assert_int_equal(hs_strtab_count(t, 1), 7);
    assert_int_equal(hs_strtab_count(t, 0), 0);
    enum { N = 20000 }; /* > 1024 slots, 512 entries; 20000 · ~40 bytes > the 64 KiB arena */
    char w[64];
    for (int i = 0; i < N; i++) {
        int n = snprintf(w, sizeof w, "word-%d-padding-to-grow-the-arena-%d", i, i % 7);
        assert_int_equal(hs_strtab_find(t, w, (size_t)n, 1), 4 + i);
    }
    assert_int_equal(hs_strtab_size(t), 4 + N);
    for (int i = 0; i < N; i++) {
        int n = snprintf(w, sizeof w, "word-%d-padding-to-grow-the-arena-%d", i, i % 7);
        size_t len;
        const char *got = hs_strtab_str(t, 4 + i, &len);
        assert_int_equal(len, (size_t)n);
        assert_memory_equal(got, w, len);
        assert_int_equal(hs_strtab_find(t, w, (size_t)n, 0), 4 + i);
    }
    size_t len;
    assert_memory_equal(hs_strtab_str(t, 2, &len), "a\0b", 3);
    assert_int_equal(len, 3);
    hs_strtab_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(worked_example_gives_the_merges_derived_by_hand),
        cmocka_unit_test(size_stops_the_merging_exactly),
        cmocka_unit_test(min_frequency_stops_before_rarer_pairs),
        cmocka_unit_test(size_below_the_alphabet_is_refused),
        cmocka_unit_test(limit_alphabet_keeps_the_most_frequent_characters),
        cmocka_unit_test(incremental_counts_agree_with_recounting_from_scratch),
        cmocka_unit_test(multibyte_characters_are_single_symbols),
        cmocka_unit_test(word_counts_add_pack_merge_and_sort),
        cmocka_unit_test(string_table_numbers_counts_and_growth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
