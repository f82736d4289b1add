/* How `hetseq prep bert` cuts text into documents and sentences, and its random-number and masking
 * building blocks, on hand-written inputs with the expected answers written out; and how `hetseq prep
 * vocab` / `prep bert` skip the binary files of a directory corpus (one summary line, not one warning
 * per file; --strict still stops at the file). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* ---- binary files in a directory corpus ------------------------------------------------------------ */

static char g_dir[256];

static const char *in_dir(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

static void write_bytes(const char *path, const char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void make_corpus_dir(void) {
    snprintf(g_dir, sizeof g_dir, "%s/hetseq-test-corpus.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(g_dir));
    assert_int_equal(mkdir(in_dir("text"), 0700), 0);
}

static void remove_corpus_dir(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    assert_int_equal(system(cmd), 0);
}

/* The sniff finds a NUL among the first HS_CORPUS_SNIFF_BYTES only; the message counts the files and
 * names the first relative to the directory the user gave. */
static void binary_files_are_told_apart_and_summarised(void **state) {
    (void)state;
    make_corpus_dir();
    static char late[HS_CORPUS_SNIFF_BYTES + 100];
    memset(late, 'x', sizeof late);
    late[HS_CORPUS_SNIFF_BYTES + 10] = '\0';
    write_bytes(in_dir("text/a.txt"), "words and more words\n", 21);
    write_bytes(in_dir("text/a.dat"), "\0\0\0\2abc", 7);
    write_bytes(in_dir("text/b.dat"), "abc\0", 4);
    write_bytes(in_dir("text/late.txt"), late, sizeof late);
    write_bytes(in_dir("text/empty.txt"), "", 0);
    long long at = 99;
    assert_int_equal(hs_corpus_looks_binary(in_dir("text/a.txt"), &at), 0);
    assert_int_equal(hs_corpus_looks_binary(in_dir("text/a.dat"), &at), 1);
    assert_int_equal(at, 0);
    assert_int_equal(hs_corpus_looks_binary(in_dir("text/b.dat"), &at), 1);
    assert_int_equal(at, 3);
    assert_int_equal(hs_corpus_looks_binary(in_dir("text/late.txt"), &at), 0); /* the reader reports it */
    assert_int_equal(hs_corpus_looks_binary(in_dir("text/empty.txt"), &at), 0);
    assert_int_equal(hs_corpus_looks_binary(in_dir("text/missing"), &at), 0);

    hs_binary_skips skips = {0};
    char msg[1024], want[1024];
    assert_int_equal(hs_binary_skips_message(&skips, in_dir("text"), msg, sizeof msg), 0);
    hs_binary_skips_add(&skips, in_dir("text/a.dat"), 0);
    assert_int_equal(hs_binary_skips_message(&skips, in_dir("text"), msg, sizeof msg), 1);
    snprintf(want, sizeof want, "skipped 1 binary file in %s: a.dat (NUL byte at byte offset 0; --strict stops at it "
             "instead)", in_dir("text"));
    assert_string_equal(msg, want);
    hs_binary_skips_add(&skips, in_dir("text/b.dat"), 3);
    assert_int_equal(hs_binary_skips_message(&skips, in_dir("text/"), msg, sizeof msg), 1); /* DIR/ as typed */
    snprintf(want, sizeof want, "skipped 2 binary files in %s (e.g. a.dat, NUL byte at byte offset 0; --strict stops "
             "at them instead)", in_dir("text"));
    assert_string_equal(msg, want);
    hs_binary_skips_free(&skips);
    remove_corpus_dir();
}

/* Runs a shell command; its exit status, and its output (stdout and stderr) in out. */
static int run(const char *cmd, char *out, size_t len) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines_with(const char *text, const char *needle) {
    int n = 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        n += strstr(buf, needle) != NULL;
        line += len + (nl != NULL);
    }
    return n;
}

/* The commands on a directory like /usr/share/games/fortunes (text files and their *.dat indexes):
 * one summary line for the binary files, not one warning each; --strict stops naming the file. Runs
 * the hetseq binary of the build ($HETSEQ, set by make check; skipped without it). */
static void prep_commands_skip_binary_files_with_one_line(void **state) {
    (void)state;
    const char *hetseq = getenv("HETSEQ"), *top = getenv("top_srcdir");
    if (!hetseq || access(hetseq, X_OK) != 0 || !top) skip();
    make_corpus_dir();
    char cmd[4096], out[1 << 16];
    static const char *const texts[] = {"bread", "clocks", "gardens", "lighthouses", "rivers"};
    for (int i = 0; i < 5; i++) {
        snprintf(cmd, sizeof cmd, "cp '%s/tests/fixtures/prep_corpus/%s.txt' '%s'", top, texts[i], in_dir("text"));
        assert_int_equal(system(cmd), 0);
        char name[64];
        snprintf(name, sizeof name, "text/%s.dat", texts[i]);
        write_bytes(in_dir(name), "\0\0\0\2\0\0\0\x40", 8);
    }

    snprintf(cmd, sizeof cmd, "'%s' prep vocab --corpus '%s' --size 200 --out '%s'", hetseq, in_dir("text"),
             in_dir("vocab.txt"));
    if (run(cmd, out, sizeof out) != 0) fail_msg("%s failed:\n%s", cmd, out);
    char want[1024];
    snprintf(want, sizeof want, "hetseq: warning: prep vocab: skipped 5 binary files in %s (e.g. bread.dat, NUL byte "
             "at byte offset 0; --strict stops at them instead)", in_dir("text"));
    if (!strstr(out, want) || count_lines_with(out, ".dat") != 1)
        fail_msg("prep vocab: expected one line\n  %s\nand no other line naming a .dat file; got:\n%s", want, out);

    snprintf(cmd, sizeof cmd, "'%s' prep bert --corpus '%s' --vocab '%s' --out '%s' --seq-len 32 --max-pred 4 "
             "--dupe-factor 1", hetseq, in_dir("text"), in_dir("vocab.txt"), in_dir("shards"));
    if (run(cmd, out, sizeof out) != 0) fail_msg("%s failed:\n%s", cmd, out);
    snprintf(want, sizeof want, "hetseq: warning: prep bert: skipped 5 binary files in %s (e.g. bread.dat", in_dir("text"));
    if (!strstr(out, want) || count_lines_with(out, ".dat") != 1)
        fail_msg("prep bert: expected one line starting\n  %s\nand no other line naming a .dat file; got:\n%s", want, out);
    if (!strstr(out, "5 files read") || !strstr(out, "0 skipped"))
        fail_msg("prep bert: the summary should count 5 files read, 0 skipped:\n%s", out);

    /* --strict: an error that names the first binary file, and no shard */
    snprintf(cmd, sizeof cmd, "'%s' prep bert --corpus '%s' --vocab '%s' --out '%s' --seq-len 32 --max-pred 4 "
             "--dupe-factor 1 --strict", hetseq, in_dir("text"), in_dir("vocab.txt"), in_dir("strict"));
    if (run(cmd, out, sizeof out) == 0 || !strstr(out, "bread.dat: not a text file (NUL byte at byte offset 0)"))
        fail_msg("prep bert --strict must fail naming bread.dat:\n%s", out);
    snprintf(cmd, sizeof cmd, "'%s' prep vocab --corpus '%s' --size 200 --out '%s' --strict", hetseq, in_dir("text"),
             in_dir("strict.txt"));
    if (run(cmd, out, sizeof out) == 0 || !strstr(out, "bread.dat is binary, not text: NUL byte at byte offset 0"))
        fail_msg("prep vocab --strict must fail naming bread.dat:\n%s", out);

    /* only binary files: a clear error, not "empty directory" */
    snprintf(cmd, sizeof cmd, "rm -f '%s'/*.txt && '%s' prep vocab --corpus '%s' --size 200 --out '%s'", in_dir("text"),
             hetseq, in_dir("text"), in_dir("v2.txt"));
    if (run(cmd, out, sizeof out) == 0 || !strstr(out, "its directories hold only binary files (5 skipped)"))
        fail_msg("prep vocab on only binary files:\n%s", out);
    remove_corpus_dir();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prose_cuts_at_sentence_ends_only),
        cmocka_unit_test(blank_and_percent_lines_end_documents),
        cmocka_unit_test(auto_mode_tells_wrapped_text_from_sentence_lines),
        cmocka_unit_test(corpus_drops_empty_sentences_and_documents),
        cmocka_unit_test(rng_integers_cover_the_range_evenly),
        cmocka_unit_test(masking_follows_googles_rule),
        cmocka_unit_test(binary_files_are_told_apart_and_summarised),
        cmocka_unit_test(prep_commands_skip_binary_files_with_one_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
