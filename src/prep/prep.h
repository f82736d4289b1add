/* `hetseq prep ...` subcommands. Each returns the process exit status. */
#ifndef HS_PREP_PREP_H
#define HS_PREP_PREP_H

#include "comm/comm.h"

/* hetseq prep mnist --in DIR --out FILE.h5 [--limit-train N] [--limit-test N]
 * argv[0] is "mnist". Runs on rank 0 (other ranks wait); IDX files may be gzipped or not. */
int hs_prep_mnist_main(int argc, char **argv, const hs_comm *comm);

/* hetseq prep repack --in FILE_OR_DIR --out DIR [--rows-per-chunk 64] [--gzip 0..9]
 * argv[0] is "repack". Rewrites BERT shards with chunks of [rows_per_chunk, all columns] per dataset,
 * same types and values (optionally shuffle + gzip). Ranks split the files round-robin; every rank
 * returns the same exit status. */
int hs_prep_repack_main(int argc, char **argv, const hs_comm *comm);

/* hetseq prep vocab --corpus PATH... --size N --out vocab.txt [--cased] [--min-frequency 2]
 *                   [--limit-alphabet 1000] [--strict]
 * argv[0] is "vocab". Learns a WordPiece vocabulary (special tokens, alphabet, ## pieces, merges) from
 * UTF-8 text; ranks count the words of their share of the files, rank 0 learns and writes. Every rank
 * returns the same exit status. */
int hs_prep_vocab_main(int argc, char **argv, const hs_comm *comm);

/* hetseq prep bert --corpus PATH... --vocab vocab.txt --out DIR [--seq-len 128] [--max-pred 20] ...
 * argv[0] is "bert". Text -> WordPiece -> NVIDIA-format pre-training shards (Google's instance and
 * masking algorithm). Ranks share the reading and the shards; the output does not depend on the number
 * of ranks. Every rank returns the same exit status. */
int hs_prep_bert_main(int argc, char **argv, const hs_comm *comm);

/* hetseq prep lm --in DIR --out DIR [--min-freq 0] [--max-size N] [--lower-case] [--skip-empty-lines]
 * hetseq prep lm --raw PATH... --out DIR [--valid-fraction F] [--test-fraction F] [--seed S] [--write-tokens DIR]
 * argv[0] is "lm". WikiText-format token files (or ordinary text made into them) -> NVIDIA's word
 * vocabulary of the train split -> DIR/lm.h5 (data/lm_data.h). Rank 0 works, the others wait; the output
 * does not depend on the number of ranks. Every rank returns the same exit status. */
int hs_prep_lm_main(int argc, char **argv, const hs_comm *comm);

#endif
