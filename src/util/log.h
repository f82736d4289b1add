/* Logging: rank 0 prints progress; warnings are printed once by the rank that sees them. */
#ifndef HS_UTIL_LOG_H
#define HS_UTIL_LOG_H

#include "util/check.h"

void hs_log_set_rank(int rank);
int hs_log_rank(void);
/* Rank 0 only, to stdout, flushed. */
void hs_log(const char *fmt, ...) HS_PRINTF(1, 2);
/* Any rank, to stderr, prefixed "hetseq: warning:". */
void hs_warn(const char *fmt, ...) HS_PRINTF(1, 2);
/* The same from the first rank of each node only (a fact about the node's hardware or libraries, which
 * every rank of the node would repeat). */
void hs_log_set_local_rank(int local_rank);
void hs_warn_node(const char *fmt, ...) HS_PRINTF(1, 2);
/* A note (not a warning) from the first rank of each node, to stderr, prefixed "hetseq: ": something
 * hetseq did about the node's libraries that the user should know once. */
void hs_note_node(const char *fmt, ...) HS_PRINTF(1, 2);

#endif
