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

#endif
