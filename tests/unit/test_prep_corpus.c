/* How `hetseq prep bert` cuts text into documents and sentences, and its random-number and masking
 * building blocks, on hand-written inputs with the expected answers written out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prep/corpus.h"
#include "prep/instances.h"

/* Collected sentences as "text|text|#|text|#" ('#' = end of a document). */
typedef struct collected {
    char buf[4096];
} collected;

static void on_sentence(const char *s, size_t n, void *ctx) {
    collected *c = ctx;
    strncat(c->buf, s, n);
    strcat(c->buf, "|");
}
static void on_document_end(void *ctx) { strcat(((collected *)ctx)->buf, "#|"); }

static const char *split(const char *text, hs_split_mode mode, collected *c) {
    c->buf[0] = 0;
    hs_text_sink sink = {on_sentence, on_document_end, c};
    hs_corpus_split(text, strlen(text), mode, &sink);
    return c->buf;
}

static void prose_cuts_at_sentence_ends_only(void **state) {
    (void)state;
    collected c;
    const char *text = "Dr. Brown lives here. He said \"Stop!\" Then he left.\n"
                       "Bring fruit, e.g. Apples and pears. Mr. J. R. Smith agreed...\n"
                       "Did he? \"Yes,\" she said. It costs 3.50 now. (It was cheap.) Fine.";
    assert_string_equal(split(text, HS_SPLIT_PROSE, &c),
                        "Dr. Brown lives here.|He said \"Stop!\"|Then he left.|"
                        "Bring fruit, e.g. Apples and pears.|Mr. J. R. Smith agreed...|"
                        "Did he?|\"Yes,\" she said.|It costs 3.50 now.|(It was cheap.)|Fine.|#|");
}

static void blank_and_percent_lines_end_documents(void **state) {
    (void)state;
    collected c;
    const char *text = "%\nfirst line\n  second line  \n\n\n%\nthird\r\n \t\n%\n%\nfourth\n";
    assert_string_equal(split(text, HS_SPLIT_LINES, &c), "first line|second line|#|third|#|fourth|#|");
    /* prose joins the lines of a document */
    assert_string_equal(split("wrapped line\nwithout end\n\nNext doc. Two\n", HS_SPLIT_PROSE, &c),
                        "wrapped line without end|#|Next doc.|Two|#|");
}

static void auto_mode_tells_wrapped_text_from_sentence_lines(void **state) {
    (void)state;
    const char *wrapped = "Bread is one of the oldest foods that people make. It needs only flour,\n"
                          "water, salt and a little yeast. The baker mixes these things into a soft\n"
                          "dough and then waits.\n";
    const char *lines = "The old lighthouse stood at the end of a pier.\nEvery evening the keeper lit the lamp.\n\n"
                        "Ships watched for the flash!\n";
    assert_int_equal(hs_corpus_detect_mode(wrapped, strlen(wrapped)), HS_SPLIT_PROSE);
    assert_int_equal(hs_corpus_detect_mode(lines, strlen(lines)), HS_SPLIT_LINES);
}

static void corpus_drops_empty_sentences_and_documents(void **state) {
    (void)state;
    hs_corpus c = {0};
    int32_t a[3] = {7, 8, 9}, b[1] = {5};
    hs_corpus_end_document(&c); /* nothing yet: no document */
    hs_corpus_add_sentence(&c, a, 3);
    hs_corpus_add_sentence(&c, a, 0); /* no tokens: dropped */
    hs_corpus_add_sentence(&c, b, 1);
    hs_corpus_end_document(&c);
    hs_corpus_end_document(&c);
    hs_corpus_add_sentence(&c, b, 1);
    hs_corpus_end_document(&c);
    assert_int_equal(c.n_docs, 2);
    assert_int_equal(c.n_sents, 3);
    assert_int_equal(c.doc_end[0], 2);
    assert_int_equal(c.doc_end[1], 3);
    assert_int_equal(c.sent_end[0], 3);
    assert_int_equal(c.sent_end[1], 4);
    assert_int_equal(c.tokens[3], 5);
    hs_corpus_free(&c);
}

static void rng_integers_cover_the_range_evenly(void **state) {
    (void)state;
    hs_prep_rng r = hs_prep_rng_make(42);
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) {
        int64_t v = hs_prep_rng_int(&r, 3, 9);
        assert_true(v >= 3 && v <= 9);
        counts[v - 3]++;
    }
    /* 10000 expected each, sd = sqrt(70000 * 1/7 * 6/7) = 92.6; 5 sd */
    for (int k = 0; k < 7; k++) assert_true(abs(counts[k] - 10000) < 463);
    /* the same key gives the same stream */
    hs_prep_rng r1 = hs_prep_rng_make(7), r2 = hs_prep_rng_make(7);
    for (int i = 0; i < 10; i++) assert_true(hs_prep_rng_next(&r1) == hs_prep_rng_next(&r2));
    int64_t perm[50];
    for (int i = 0; i < 50; i++) perm[i] = i;
    hs_prep_rng_shuffle(&r, perm, 50);
    int seen[50] = {0}, moved = 0;
    for (int i = 0; i < 50; i++) {
        seen[perm[i]]++;
        moved += perm[i] != i;
    }
    for (int i = 0; i < 50; i++) assert_int_equal(seen[i], 1);
    assert_true(moved > 40);
}

static void masking_follows_googles_rule(void **state) {
    (void)state;
    hs_instance_params p = {.seq_len = 32, .max_pred = 20, .masked_lm_prob = 0.15, .vocab_size = 1000,
                            .special = {.pad = 0, .unk = 1, .cls = 2, .sep = 3, .mask = 4}};
    /* [CLS] 10..17 [SEP] 20..27 [SEP]: 19 tokens -> round(2.85) = 3 predictions */
    int32_t tokens[19], orig[19], pos[20], lab[20];
    for (int trial = 0; trial < 200; trial++) {
        tokens[0] = 2;
        for (int i = 1; i <= 8; i++) tokens[i] = 9 + i;
        tokens[9] = 3;
        for (int i = 10; i <= 17; i++) tokens[i] = 10 + i;
        tokens[18] = 3;
        memcpy(orig, tokens, sizeof tokens);
        hs_prep_rng r = hs_prep_rng_make((uint64_t)trial);
        int n = hs_mask_tokens(tokens, 19, &p, &r, pos, lab);
        assert_int_equal(n, 3);
        for (int k = 0; k < n; k++) {
            assert_true(pos[k] != 0 && pos[k] != 9 && pos[k] != 18);
            if (k) assert_true(pos[k] > pos[k - 1]);
            assert_int_equal(lab[k], orig[pos[k]]);
        }
        for (int i = 0, k = 0; i < 19; i++) { /* unmasked tokens unchanged */
            if (k < n && pos[k] == i) k++;
            else assert_int_equal(tokens[i], orig[i]);
        }
    }
    /* 10 tokens x 0.15 = 1.5 rounds to 2 (even); 30 x 0.15 = 4.5 rounds to 4; the cap and the floor of 1 */
    int32_t t[40], ps[40], lb[40];
    for (int len = 5; len <= 40; len += 5) {
        for (int i = 0; i < len; i++) t[i] = 10 + i;
        t[0] = 2;
        t[len - 1] = 3;
        hs_prep_rng r = hs_prep_rng_make(1);
        int expect = len == 5 ? 1 : len == 10 ? 2 : len == 30 ? 4 : (int)(len * 0.15 + 0.5);
        assert_int_equal(hs_mask_tokens(t, len, &p, &r, ps, lb), expect);
    }
    p.max_pred = 2;
    for (int i = 0; i < 40; i++) t[i] = 10 + i;
    hs_prep_rng r = hs_prep_rng_make(1);
    assert_int_equal(hs_mask_tokens(t, 40, &p, &r, ps, lb), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prose_cuts_at_sentence_ends_only),
        cmocka_unit_test(blank_and_percent_lines_end_documents),
        cmocka_unit_test(auto_mode_tells_wrapped_text_from_sentence_lines),
        cmocka_unit_test(corpus_drops_empty_sentences_and_documents),
        cmocka_unit_test(rng_integers_cover_the_range_evenly),
        cmocka_unit_test(masking_follows_googles_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
