/* NVIDIA BERT pre-training shards (create_pretraining_data.py output, docs/data-formats.md): one HDF5
 * file per shard, six datasets at the root, read unchanged. Many files form one dataset (concatenated in
 * sorted file-name order, as HetSeq). Every rank reads its micro-batch of rows through MPI-IO on the I/O
 * communicator with collective transfers in the on-disk types, then widens to int32 and builds the
 * masked-LM label lists. A read involves only the files some rank's rows are in (agreed with one small
 * allgather), and a file once opened stays open, so its cost does not grow with the number of files. */
#ifndef HS_DATA_BERT_SHARDS_H
#define HS_DATA_BERT_SHARDS_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hs_bert_shards hs_bert_shards;

/* COLLECTIVE over io_comm. path: one file (used whatever its name), or a directory: its regular files
 * whose NAME contains `split` (NULL or "" = every file; names starting with '.' are skipped), sorted by
 * strcmp like HetSeq (x_10 before x_2); num_file > 0 keeps the first num_file. Rank 0 lists the
 * directory and broadcasts the list, so every rank sees the same files in the same order. Every rank
 * checks it can read every file; rank r checks the layout of files r, r + size, ... (metadata only,
 * through HDF5's POSIX driver) and the ranks gather the results: the six datasets exist, hold integers
 * (any width and sign; read in the on-disk type), have shapes [N,L] / [N,P] / [N], the same N within a
 * file and the same L and P in every file. A problem is a user error naming the file and dataset (the
 * first bad file in sorted order; every rank ends). Warns once (rank 0) when input_ids is chunked so
 * thinly that a row touches more than 4 chunks, and names the repack command. No file is opened
 * through MPI-IO here: reads open them. */
hs_bert_shards *hs_bert_shards_open(const char *path, const char *split, int num_file, MPI_Comm io_comm);
int64_t hs_bert_shards_num_samples(const hs_bert_shards *s); /* rows of all files */
int hs_bert_shards_seq_len(const hs_bert_shards *s);         /* L */
int hs_bert_shards_max_pred(const hs_bert_shards *s);        /* P */
int hs_bert_shards_num_files(const hs_bert_shards *s);
const char *hs_bert_shards_file_path(const hs_bert_shards *s, int i); /* i-th file, sorted order */

/* One micro-batch in host memory, widened to int32. Masked-LM labels as NVIDIA/HetSeq: the list of
 * masked positions ends at the first 0 (position 0 is [CLS], never masked). */
typedef struct hs_bert_batch {
    int count, seq_len, max_pred;
    int32_t *input_ids;     /* [count, L] WordPiece ids, 0-padded */
    int32_t *segment_ids;   /* [count, L] token type 0/1 */
    int32_t *input_mask;    /* [count, L] 1 = real token, 0 = padding */
    int32_t *mlm_positions; /* [count, P] positions of the labelled tokens, ascending, -1 padded */
    int32_t *mlm_ids;       /* [count, P] their original ids, -1 where the position is -1 */
    int32_t *nsp_labels;    /* [count]   0 = B follows A (IsNext), 1 = B is random */
    int32_t *num_mlm;       /* [count]   number of labelled positions of each row */
} hs_bert_batch;

/* Bytes of one contiguous host buffer holding the header and the arrays of up to max_count rows. */
size_t hs_bert_batch_bytes(int max_count, int seq_len, int max_pred);
/* Lays out the header and the arrays of `count` rows inside buf (at least hs_bert_batch_bytes(count,
 * ...) bytes, aligned like malloc) and returns the header (= buf). Contents are not touched. */
hs_bert_batch *hs_bert_batch_view(void *buf, int count, int seq_len, int max_pred);

/* COLLECTIVE over io_comm (every rank calls it the same number of times; count may be 0): rows
 * [first, first+count) of the concatenated dataset, which may span files, into the batch view in buf.
 * One MPI_Allgather of every rank's file range, then collective reads of exactly the files in the
 * union of those ranges; a rank without rows in one of them joins its reads with an empty selection.
 * A file is opened (collectively) when a read first touches it and stays open: at most
 * hs_bert_shards_max_open files at once (least recently used closed first).
 * Checks every value read: token ids (input_ids, the labelled masked_lm_ids) in [0, vocab_size) (the
 * model's vocabulary before any padding to a multiple of 8; no check when vocab_size <= 0), input_mask, segment_ids and next_sentence_labels 0 or 1, labelled
 * positions in [1, L) and strictly ascending. A bad value is a user error naming the file, dataset,
 * row and value (it ends every rank). Call from one thread only (HDF5 is not thread-safe). */
void hs_bert_shards_read(hs_bert_shards *s, int64_t first, int count, int vocab_size, void *buf);

/* OR over every read so far of H5Pget_mpio_no_collective_cause (local and global); 0 = every transfer
 * was collective. */
uint32_t hs_bert_shards_no_collective_cause(const hs_bert_shards *s);
/* MPI-IO opens of shard files so far. While the files fit under the bound, each file a read touched
 * was opened exactly once, however often it was read. */
int64_t hs_bert_shards_file_opens(const hs_bert_shards *s);
/* How many files stay open at once, the same on every rank: min(files, 1024, a quarter of the soft
 * RLIMIT_NOFILE, which is raised towards the hard limit when lower than 4 per file). About 0.7 MB of
 * HDF5 memory per rank per open file. */
int hs_bert_shards_max_open(const hs_bert_shards *s);
/* COLLECTIVE: closes every file. NULL is allowed. */
void hs_bert_shards_close(hs_bert_shards *s);

#endif
