/* Language-model data (Transformer-XL): one HDF5 file <data.path>/lm.h5 written by `hetseq prep lm`
 * (docs/data-formats.md, "Language-model data"):
 *   /train, /valid, /test   int32 [N]   token ids of each split, <eos> at every line end
 *   /vocab                  string [V]  the words, id = index (most frequent first, specials first)
 *   attributes of /: format = "hetseq-lm-1", vocab_size, eos_id, unk_id (-1 if none), lower_case
 * Opened collectively (parallel HDF5 on the I/O communicator); reads are collective too. */
#ifndef HS_DATA_LM_DATA_H
#define HS_DATA_LM_DATA_H

#include <mpi.h>
#include <stdint.h>

typedef enum { HS_LM_TRAIN = 0, HS_LM_VALID = 1, HS_LM_TEST = 2 } hs_lm_split;

typedef struct hs_lm_data hs_lm_data;

/* COLLECTIVE on io_comm: open <dir>/lm.h5 and check its format (a missing file, a missing split or a
 * wrong type ends the run on every rank with a message naming the file and what to run). */
hs_lm_data *hs_lm_open(const char *dir, MPI_Comm io_comm);
void hs_lm_close(hs_lm_data *d);

int64_t hs_lm_split_tokens(const hs_lm_data *d, hs_lm_split split); /* 0 for an empty split */
int32_t hs_lm_vocab_size(const hs_lm_data *d);
int32_t hs_lm_eos_id(const hs_lm_data *d);
/* The word of an id (for logs and demos); "?" outside the vocabulary. */
const char *hs_lm_word(const hs_lm_data *d, int32_t id);
const char *hs_lm_path(const hs_lm_data *d);

/* COLLECTIVE on io_comm: every rank calls it the same number of times in the same order (count may be
 * 0: an empty selection). dst[i·len .. (i+1)·len) = tokens[starts[i], starts[i]+len) of `split`, for
 * i in [0, count); every run must lie inside the split (checked: a message, not a crash). Ids are NOT
 * checked here (the task checks them against its model's vocabulary while staging). */
void hs_lm_read_runs(hs_lm_data *d, hs_lm_split split, const int64_t *starts, int count, int64_t len, int32_t *dst);

/* Added accessors: the id of "<unk>" (-1 if the vocabulary has none); HDF5's no-collective causes OR-ed over every read (0: every transfer
 * was collective). */
int32_t hs_lm_unk_id(const hs_lm_data *d);
uint32_t hs_lm_no_collective_cause(const hs_lm_data *d);

#endif
