/* Evaluation: validation during training and `hetseq eval`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"
#include "train/trainer.h"
#include "util/check.h"
#include "util/log.h"

void hs_evaluate_split(hs_task *task, hs_prefetch *pf, const hs_comm *comm, hs_split split, int max_sentences,
                       int max_per_request, hs_stats *global) {
    hs_sampler s;
    hs_sampler_init(&s, task->num_samples(task, split), max_sentences, comm->size, comm->rank, 0, 0);
    int64_t n = hs_sampler_shard_len(&s);
    hs_range *shard;
    HS_ALLOC(shard, n);
    hs_sampler_epoch_shard(&s, 1, shard);
    /* The tasks add into a device stats buffer; it is read once, at the end. */
    const hs_backend *be = task->params.be;
    double *stats_dev = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double)); /* zero-filled */
    /* Keep two requests in flight so reading overlaps evaluation. */
    int64_t next = 0;
    int outstanding = 0;
    while (next < n || outstanding > 0) {
        while (next < n && outstanding < 2) {
            int k = (int)(n - next < max_per_request ? n - next : max_per_request);
            hs_prefetch_request(pf, split, shard + next, k);
            next += k;
            outstanding++;
        }
        hs_prefetch_slot *slot = hs_prefetch_wait(pf);
        for (int i = 0; i < slot->n; i++)
            if (slot->ranges[i].count > 0)
                task->evaluate(task, slot->bufs[i], slot->ranges[i].first, slot->ranges[i].count, stats_dev);
        hs_prefetch_release(pf, slot);
        outstanding--;
    }
    free(shard);
    double sums[HS_STATS_NDOUBLE];
    be->download(be, sums, stats_dev, sizeof sums);
    be->free(be, stats_dev);
    hs_comm_allreduce_sum_double(comm, sums, HS_STATS_NDOUBLE);
    memcpy(global, sums, sizeof *global);
}

/* Rank 0 reads the checkpoint's weights and broadcasts them, so save_dir may be node-local. */
static void load_weights(const char *path, hs_task *task, const hs_comm *comm) {
    if (comm->rank == 0) {
        if (!hs_file_exists(path)) hs_die("checkpoint %s does not exist or is not readable", path);
        hs_checkpoint_load(path, &task->params, NULL, NULL, NULL);
    }
    hs_comm_bcast_device(comm, task->params.be, task->params.data, task->params.total * sizeof(float), 0);
}

int hs_eval_main(const hs_config *cfg, const char *checkpoint, const hs_comm *comm) {
    hs_setup_threads(comm);
    const hs_backend *be = hs_backend_select(hs_cfg_string(cfg, "device"), comm->local_rank);
    hs_task *task = hs_task_create(cfg, comm, be);
    load_weights(checkpoint, task, comm);
    int max_sentences = (int)hs_cfg_int(cfg, "training.max_sentences");
    hs_prefetch *pf = hs_prefetch_start(task, be, max_sentences, 4);
    hs_stats global;
    hs_evaluate_split(task, pf, comm, HS_SPLIT_VALID, max_sentences, 4, &global);
    hs_prefetch_stop(pf);
    long long total = (long long)global.sample_count, correct = (long long)global.correct;
    if (task->loss_from_stats) {
        /* Tasks with several loss terms (BERT: MLM + NSP) print their own metrics. */
        char fields[512] = "";
        if (task->format_stats) task->format_stats(&global, 0, fields, sizeof fields);
        hs_log("\nValidation set (%s): loss %.4f%s, samples %lld\n", hs_cfg_string(cfg, "data.valid_subset"),
               task->loss_from_stats(&global), fields, total);
    } else {
        /* HetSeq's eval_mnist.py line, with the true average loss (HetSeq divided batch means by N). */
        hs_log("\nTest set: Average loss: %.4f, Accuracy: %lld/%lld (%.0f%%)\n",
               total ? global.loss_sum / (double)total : 0.0, correct, total,
               total ? 100.0 * (double)correct / (double)total : 0.0);
    }
    hs_task_destroy(task);
    return 0;
}
