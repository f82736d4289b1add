/* Tokenizes a text file line by line with hetseq's BERT tokenizer, for
 * tests/ref/test_tokenizer_vs_hf.py.
 *
 *   tokenize_driver VOCAB TEXT [--cased] [--repeat N] [--words]
 *
 * Lines end with "\n" (a last line without one counts). For each line it prints the token ids separated
 * by spaces (or, with --words, the basic tokenizer's words separated by U+0001 - no word contains a
 * control character). --cased keeps case and accents (do_lower_case = 0). The file must be valid UTF-8
 * (else: exit 1 naming the byte offset). On stderr: bytes, lines, tokens and the tokenizer's speed in
 * MB/s, timed over --repeat passes (default 1) without the printing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prep/wordpiece.h"
#include "util/check.h"
#include "util/timer.h"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "tokenize_driver: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void print_word(const char *word, size_t len, void *ctx) {
    int *first = ctx;
    if (!*first) putchar('\x01');
    fwrite(word, 1, len, stdout);
    *first = 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tokenize_driver VOCAB TEXT [--cased] [--repeat N] [--words]\n");
        return 2;
    }
    int lower = 1, repeat = 1, words = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--cased")) lower = 0;
        else if (!strcmp(argv[i], "--words")) words = 1;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else {
            fprintf(stderr, "tokenize_driver: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    hs_vocab *v = hs_vocab_load(argv[1]);
    size_t len;
    char *text = read_file(argv[2], &len);
    long long bad = hs_utf8_check(text, len);
    if (bad >= 0) {
        fprintf(stderr, "tokenize_driver: %s: invalid UTF-8 at byte offset %lld\n", argv[2], bad);
        return 1;
    }

    if (words) {
        for (size_t start = 0; start < len;) {
            const char *nl = memchr(text + start, '\n', len - start);
            size_t end = nl ? (size_t)(nl - text) : len;
            int first = 1;
            hs_basic_tokenize(text + start, end - start, lower, print_word, &first);
            putchar('\n');
            start = end + 1;
        }
        free(text);
        hs_vocab_free(v);
        return 0;
    }

    /* every line's ids into one array; line_end[l] = ids.count after line l */
    size_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    if (len && text[len - 1] != '\n') lines++;
    size_t *line_end = malloc((lines + 1) * sizeof *line_end);
    hs_ids ids = {0};
    double best = 1e30;
    for (int r = 0; r < repeat; r++) {
        ids.count = 0;
        size_t l = 0;
        double t0 = hs_now();
        for (size_t start = 0; start < len; l++) {
            const char *nl = memchr(text + start, '\n', len - start);
            size_t end = nl ? (size_t)(nl - text) : len;
            hs_bert_tokenize(v, text + start, end - start, lower, &ids);
            line_end[l] = ids.count;
            start = end + 1;
        }
        double t = hs_now() - t0;
        if (t < best) best = t;
    }
    size_t at = 0;
    for (size_t l = 0; l < lines; l++) {
        for (; at < line_end[l]; at++) printf(at + 1 < line_end[l] ? "%d " : "%d", ids.ids[at]);
        putchar('\n');
    }
    fprintf(stderr, "tokenized %zu bytes, %zu lines, %zu tokens in %.3f s: %.1f MB/s\n", len, lines, ids.count, best,
            (double)len / 1e6 / best);
    hs_ids_free(&ids);
    free(line_end);
    free(text);
    hs_vocab_free(v);
    return 0;
}
