/* The BERT tokenizer as a user meets it: WordPiece splits words greedily into the longest vocabulary
 * pieces with "##" continuations (BERT paper's "unaffable" -> un ##aff ##able), an uncoverable or
 * over-long word is one [UNK], a vocabulary file without the special tokens is refused with a message
 * naming the file, and the UTF-8 check points at the first bad byte as Python's strict decoder does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prep/wordpiece.h"

/* ids 0..4 special, then the pieces */
static const char *const TOKENS[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", /* 0-4 */
                                     "un", "##aff", "##able", "aff", "able",     /* 5-9 */
                                     "a", "##a", "##aa", "##aaa", "b",           /* 10-14 */
                                     "!", "ca", "##fe", "##f", "##é",            /* 15-19 */
                                     "cafe", "strasse", "##ß", "i", "x"};        /* 20-24 */
#define N_TOKENS ((int)(sizeof TOKENS / sizeof *TOKENS))

static hs_vocab *test_vocab(void) { return hs_vocab_from_tokens(TOKENS, N_TOKENS); }

static void expect_ids(hs_ids *got, const int32_t *want, size_t n, const char *what) {
    if (got->count != n) {
        char buf[512];
        int at = snprintf(buf, sizeof buf, "%s: %zu ids:", what, got->count);
        for (size_t i = 0; i < got->count && at < 400; i++) at += snprintf(buf + at, sizeof buf - at, " %d", got->ids[i]);
        fail_msg("%s, expected %zu", buf, n);
    }
    for (size_t i = 0; i < n; i++)
        if (got->ids[i] != want[i]) fail_msg("%s: id %zu is %d, expected %d", what, i, got->ids[i], want[i]);
}

static void word(const hs_vocab *v, const char *w, const int32_t *want, size_t n) {
    hs_ids ids = {0};
    hs_wordpiece_word(v, w, strlen(w), &ids);
    expect_ids(&ids, want, n, w);
    hs_ids_free(&ids);
}

static void greedy_longest_match_with_continuation_pieces(void **state) {
    (void)state;
    hs_vocab *v = test_vocab();
    word(v, "unaffable", (int32_t[]){5, 6, 7}, 3); /* un ##aff ##able, not un + a... */
    word(v, "affable", (int32_t[]){8, 7}, 2);
    /* longest first at every position: aaaaaa = a ##aaa ##aa */
    word(v, "aaaaaa", (int32_t[]){10, 13, 12}, 3);
    word(v, "ab", (int32_t[]){1}, 1); /* "##b" is not a piece */
    word(v, "a", (int32_t[]){10}, 1);
    /* greedy, not optimal: "cafe" as a whole word wins over ca ##fe */
    word(v, "cafe", (int32_t[]){20}, 1);
    word(v, "caf", (int32_t[]){16, 18}, 2);
    /* pieces end on character boundaries: ##é is two bytes */
    word(v, "caé", (int32_t[]){16, 19}, 2);
    word(v, "strasseß", (int32_t[]){21, 22}, 2);
    hs_vocab_free(v);
}

static void uncoverable_and_long_words_are_one_unk(void **state) {
    (void)state;
    hs_vocab *v = test_vocab();
    /* "unaffablez": covered up to ##able, then nothing: the whole word is [UNK], no partial pieces */
    word(v, "unaffablez", (int32_t[]){1}, 1);
    word(v, "z", (int32_t[]){1}, 1);
    char w[512];
    /* 100 characters is still a word: a ##aaa x 33 */
    memset(w, 'a', 100);
    w[100] = '\0';
    hs_ids ids = {0};
    hs_wordpiece_word(v, w, 100, &ids);
    assert_int_equal(ids.count, 34);
    assert_int_equal(ids.ids[0], 10);
    for (size_t i = 1; i < ids.count; i++) assert_int_equal(ids.ids[i], 13);
    /* 101 characters: [UNK] */
    ids.count = 0;
    memset(w, 'a', 101);
    hs_wordpiece_word(v, w, 101, &ids);
    expect_ids(&ids, (int32_t[]){1}, 1, "101 x a");
    /* the limit counts characters, not bytes: 100 x "é" (200 bytes) is one word of ## pieces */
    ids.count = 0;
    strcpy(w, "ca");
    for (int i = 0; i < 98; i++) strcat(w, "é");
    hs_wordpiece_word(v, w, strlen(w), &ids);
    assert_int_equal(ids.count, 99);
    assert_int_equal(ids.ids[0], 16);
    assert_int_equal(ids.ids[98], 19);
    ids.count = 0;
    strcat(w, "é");
    hs_wordpiece_word(v, w, strlen(w), &ids);
    expect_ids(&ids, (int32_t[]){1}, 1, "ca + 99 x é");
    hs_ids_free(&ids);
    hs_vocab_free(v);
}

/* Whole text through the basic tokenizer: lower-casing, accent stripping, punctuation, controls. */
static void whole_text_lower_cased_and_cased(void **state) {
    (void)state;
    hs_vocab *v = test_vocab();
    hs_ids ids = {0};
    const char *text = "UnAffable! CAFÉ\tSTRASSEß\x08 a\xc2\xa0" "b İ";
    /* lower-cased: unaffable ! cafe strasseß a b i (É -> e, İ -> i; NBSP splits; the backspace goes) */
    hs_bert_tokenize(v, text, strlen(text), 1, &ids);
    expect_ids(&ids, (int32_t[]){5, 6, 7, 15, 20, 21, 22, 10, 14, 23}, 10, "lower-cased");
    /* cased: UnAffable, CAFÉ, STRASSEß and İ are not in the vocabulary */
    ids.count = 0;
    hs_bert_tokenize(v, text, strlen(text), 0, &ids);
    expect_ids(&ids, (int32_t[]){1, 15, 1, 1, 10, 14, 1}, 7, "cased");
    hs_ids_free(&ids);
    hs_vocab_free(v);
}

typedef struct words {
    char text[1024];
    size_t n;
} words;

static void collect(const char *w, size_t len, void *ctx) {
    words *ws = ctx;
    memcpy(ws->text + ws->n, w, len);
    ws->n += len;
    ws->text[ws->n++] = '|';
    ws->text[ws->n] = '\0';
}

static void basic(const char *in, int lower, const char *want) {
    words ws = {.n = 0};
    ws.text[0] = '\0';
    hs_basic_tokenize(in, strlen(in), lower, collect, &ws);
    if (strcmp(ws.text, want)) fail_msg("basic tokenizer on \"%s\": got \"%s\", expected \"%s\"", in, ws.text, want);
}

static void basic_tokenizer_rules(void **state) {
    (void)state;
    /* punctuation: ASCII symbols too ($ ^ ` are not Unicode P but BERT splits them) */
    basic("a$b^c`d", 1, "a|$|b|^|c|`|d|");
    basic("Don't stop...", 1, "don|'|t|stop|.|.|.|");
    /* a control character is removed, joining its neighbours; \t \n \r separate */
    basic("ab\x07" "cd e\tf\rg\nh", 0, "abcd|e|f|g|h|");
    /* CJK ideographs are words of their own; kana and Hangul are not */
    basic("ab\xe4\xb8\xad" "cd \xe3\x81\x8b\xe3\x81\xaa", 0, "ab|\xe4\xb8\xad|cd|\xe3\x81\x8b\xe3\x81\xaa|");
    /* NFD + drop Mn: e + COMBINING ACUTE and é are both "e"; cased keeps both as they are */
    basic("e\xcc\x81 \xc3\xa9", 1, "e|e|");
    basic("e\xcc\x81 \xc3\xa9", 0, "e\xcc\x81|\xc3\xa9|");
    /* Unicode punctuation (Pi Pf Pd) splits; a symbol (Sm, Sc) does not */
    basic("\xc2\xab" "a\xe2\x80\x94" "b\xc2\xbb c\xe2\x82\xac" "d", 1, "\xc2\xab|a|\xe2\x80\x94|b|\xc2\xbb|c\xe2\x82\xac" "d|");
    /* zero-width joiner (Cf) and private use (Co) are removed; an unassigned code point is kept */
    basic("a\xe2\x80\x8d" "b c\xee\x80\x80" "d e\xcd\xb8" "f", 0, "ab|cd|e\xcd\xb8" "f|");
    /* full lower-casing of capital sharp s and Greek final sigma without context (as Hugging Face) */
    basic("\xe1\xba\x9e \xce\x9f\xce\xa3", 1, "\xc3\x9f|\xce\xbf\xcf\x83|");
}

static void vocabulary_lookup_and_save(void **state) {
    (void)state;
    hs_vocab *v = test_vocab();
    assert_int_equal(hs_vocab_size(v), N_TOKENS);
    assert_int_equal(hs_vocab_id(v, "##aff", 5), 6);
    assert_int_equal(hs_vocab_id(v, "##affx", 5), 6); /* exact bytes given by the length */
    assert_int_equal(hs_vocab_id(v, "aff", 2), -1);
    assert_string_equal(hs_vocab_token(v, 19), "##é");
    hs_special_ids s = hs_vocab_special(v);
    assert_int_equal(s.pad, 0);
    assert_int_equal(s.unk, 1);
    assert_int_equal(s.cls, 2);
    assert_int_equal(s.sep, 3);
    assert_int_equal(s.mask, 4);
    char path[] = "/tmp/hetseq-vocab-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    hs_vocab_save(v, path);
    hs_vocab *back = hs_vocab_load(path);
    assert_int_equal(hs_vocab_size(back), N_TOKENS);
    for (int i = 0; i < N_TOKENS; i++) assert_string_equal(hs_vocab_token(back, i), TOKENS[i]);
    hs_vocab_free(back);
    /* "\r\n" line ends, a last line without "\n", a repeated token (the last id wins, as in Python's dict) */
    FILE *f = fopen(path, "wb");
    fputs("[PAD]\r\n[UNK]\r\n[CLS]\n[SEP]\nhello\n[MASK]\nhello", f);
    fclose(f);
    back = hs_vocab_load(path);
    assert_int_equal(hs_vocab_size(back), 7);
    assert_int_equal(hs_vocab_id(back, "hello", 5), 6);
    assert_int_equal(hs_vocab_special(back).unk, 1);
    assert_int_equal(hs_vocab_special(back).mask, 5);
    hs_vocab_free(back);
    unlink(path);
    hs_vocab_free(v);
}

/* Loads a vocabulary file holding `content` in a child (a user error ends the process) and checks
 * its exit status 1 and message. */
static void expect_load_error(const char *content, const char *pattern) {
    char path[] = "/tmp/hetseq-vocab-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    if (content) assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
    if (!content) unlink(path); /* a missing file */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        hs_vocab_load(path);
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
    unlink(path);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    if (!strstr(msg, pattern)) fail_msg("expected \"%s\" in the message, got: %s", pattern, msg);
    if (!strstr(msg, path)) fail_msg("the message does not name the file %s: %s", path, msg);
}

static void vocabulary_without_special_tokens_is_refused(void **state) {
    (void)state;
    expect_load_error("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", "lacks the special token(s) [MASK]");
    expect_load_error("the\nof\n[UNK]\n", "lacks the special token(s) [PAD] [CLS] [SEP] [MASK]");
    expect_load_error("hello\n", "needs [PAD] [UNK] [CLS] [SEP] [MASK]");
    expect_load_error("", "is empty");
    expect_load_error("[PAD]\n[UNK]\n\xff\n", "invalid UTF-8 at byte offset 12 (line 3)");
    expect_load_error(NULL, "cannot open vocabulary");
}

static void utf8_check_offsets(void **state) {
    (void)state;
#define CHECK(lit, want) assert_int_equal(hs_utf8_check(lit, sizeof(lit) - 1), want)
    CHECK("", -1);
    CHECK("plain ASCII text, longer than eight bytes", -1);
    CHECK("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf", -1); /* 2, 3, 4 bytes, U+10FFFF */
    CHECK("\xed\x9f\xbf\xee\x80\x80", -1);                                     /* U+D7FF, U+E000 */
    CHECK("abc\x80", 3);                      /* stray continuation byte */
    CHECK("abcdefghij\xc0\xaf", 10);          /* overlong '/' */
    CHECK("ab\xc1\xbf", 2);                   /* overlong */
    CHECK("ab\xe0\x80\xaf", 2);               /* overlong 3-byte */
    CHECK("ab\xf0\x80\x80\xaf", 2);           /* overlong 4-byte */
    CHECK("ab\xed\xa0\x80", 2);               /* surrogate U+D800 */
    CHECK("ab\xed\xbf\xbf", 2);               /* surrogate U+DFFF */
    CHECK("ab\xf4\x90\x80\x80", 2);           /* U+110000 */
    CHECK("ab\xf5\x80\x80\x80", 2);           /* no such lead byte */
    CHECK("ab\xff", 2);
    CHECK("\xc3\xa9\xc3", 2);                 /* truncated at the end */
    CHECK("\xe4\xb8", 0);                     /* truncated */
    CHECK("\xe4\xb8" "a", 0);                 /* continuation missing */
    CHECK("0123456789abcdef\xf0\x9f\x98", 16); /* truncated after the 8-byte fast path */
#undef CHECK
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greedy_longest_match_with_continuation_pieces),
        cmocka_unit_test(uncoverable_and_long_words_are_one_unk),
        cmocka_unit_test(whole_text_lower_cased_and_cased),
        cmocka_unit_test(basic_tokenizer_rules),
        cmocka_unit_test(vocabulary_lookup_and_save),
        cmocka_unit_test(vocabulary_without_special_tokens_is_refused),
        cmocka_unit_test(utf8_check_offsets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
