#include "train/meters.h"

#include <math.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"

void hs_meters_init(hs_meters *m, const char *metrics_path, int resume) {
    memset(m, 0, sizeof *m);
    m->start_time = hs_now();
    if (metrics_path && *metrics_path && hs_log_rank() == 0) {
        m->metrics = fopen(metrics_path, resume ? "a" : "w");
        if (!m->metrics)
            hs_die("cannot open the metrics file %s for writing: check log.metrics_file and checkpoint.save_dir",
                   metrics_path);
    }
}

void hs_meters_close(hs_meters *m) {
    if (m->metrics) fclose(m->metrics);
    m->metrics = NULL;
}

void hs_meters_epoch_start(hs_meters *m) {
    m->epoch_start_time = hs_now();
    m->epoch_updates = 0;
}

void hs_meters_update(hs_meters *m, hs_train_state *st, const hs_stats *global, double gnorm, int clipped,
                      double seconds) {
    st->meter_loss_sum += global->loss_sum;
    st->meter_sample_count += global->sample_count;
    st->meter_gnorm_sum += gnorm;
    st->meter_clip_count += clipped ? 1 : 0;
    st->meter_updates += 1;
    st->train_wall += seconds;
    m->interval_loss_sum += global->loss_sum;
    m->interval_samples += global->sample_count;
    m->interval_correct += global->correct;
    m->interval_time += seconds;
    m->interval_updates++;
    m->epoch_updates++;
}

/* HetSeq logs losses in base 2 (fairseq): loss_bits = nats / ln 2, ppl = 2^loss. */
static double bits(double nats) { return nats / M_LN2; }

void hs_meters_log_train(hs_meters *m, const hs_train_state *st, int64_t index_in_epoch, int64_t updates_in_epoch,
                         double lr, int world_size) {
    if (hs_log_rank() == 0) {
        double loss = st->meter_sample_count > 0 ? bits(st->meter_loss_sum / st->meter_sample_count) : 0;
        double interval_loss = m->interval_samples > 0 ? m->interval_loss_sum / m->interval_samples : 0;
        double sps = m->interval_time > 0 ? m->interval_samples / m->interval_time : 0;
        double epoch_time = hs_now() - m->epoch_start_time;
        double ups = epoch_time > 0 ? (double)m->epoch_updates / epoch_time : 0;
        double bsz = m->interval_updates ? m->interval_samples / (double)m->interval_updates : 0;
        double gnorm = st->meter_updates > 0 ? st->meter_gnorm_sum / st->meter_updates : 0;
        double clip = st->meter_updates > 0 ? st->meter_clip_count / st->meter_updates : 0;
        double acc = m->interval_samples > 0 ? m->interval_correct / m->interval_samples : 0;
        printf("| epoch %03lld:  %5lld / %lld loss=%.3f, ppl=%g, sps=%.0f, ups=%.0f, bsz=%.3f, num_updates=%lld, "
               "lr=%g, gnorm=%.3f, clip=%.3f, acc=%.4f, wall=%.0f, train_wall=%.4f\n",
               (long long)st->epoch, (long long)index_in_epoch, (long long)updates_in_epoch, loss,
               round(pow(2.0, loss) * 100) / 100, sps, ups, bsz,
               (long long)st->num_updates, lr, gnorm, clip, acc, hs_now() - m->start_time, st->train_wall);
        fflush(stdout);
        if (m->metrics) {
            fprintf(m->metrics,
                    "{\"type\": \"train\", \"epoch\": %lld, \"num_updates\": %lld, \"loss\": %.6f, "
                    "\"loss_nats_interval\": %.6f, \"accuracy_interval\": %.6f, \"lr\": %.8g, \"gnorm\": %.6f, "
                    "\"samples_per_sec\": %.2f, \"world_size\": %d, \"wall\": %.3f}\n",
                    (long long)st->epoch, (long long)st->num_updates, loss, interval_loss, acc, lr, gnorm, sps,
                    world_size, hs_now() - m->start_time);
            fflush(m->metrics);
        }
    }
    m->interval_loss_sum = m->interval_samples = m->interval_correct = m->interval_time = 0;
    m->interval_updates = 0;
}

void hs_meters_log_valid(hs_meters *m, const hs_train_state *st, const char *subset, const hs_stats *global,
                         double seconds) {
    if (hs_log_rank() != 0) return;
    double nats = global->sample_count > 0 ? global->loss_sum / global->sample_count : 0;
    double acc = global->sample_count > 0 ? global->correct / global->sample_count : 0;
    printf("| epoch %03lld | valid on '%s' subset | loss %.3f | ppl %.2f | nll_loss %.4f | accuracy %.4f | "
           "samples %.0f | num_updates %lld | valid_wall %.2f\n",
           (long long)st->epoch, subset, bits(nats), pow(2.0, bits(nats)), nats, acc, global->sample_count,
           (long long)st->num_updates, seconds);
    fflush(stdout);
    if (m->metrics) {
        fprintf(m->metrics,
                "{\"type\": \"valid\", \"epoch\": %lld, \"num_updates\": %lld, \"loss\": %.6f, \"nll_loss\": %.6f, "
                "\"accuracy\": %.6f, \"samples\": %.0f, \"wall\": %.3f}\n",
                (long long)st->epoch, (long long)st->num_updates, bits(nats), nats, acc, global->sample_count,
                hs_now() - m->start_time);
        fflush(m->metrics);
    }
}
