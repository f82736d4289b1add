#include "train/meters.h"

#include <math.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"

void hs_meters_init(hs_meters *m, const hs_task *task, const char *metrics_path, int resume) {
    memset(m, 0, sizeof *m);
    m->task = task;
    m->start_time = hs_now();
    if (metrics_path && *metrics_path && hs_log_rank() == 0) {
        m->metrics = fopen(metrics_path, resume ? "a" : "w");
        if (!m->metrics)
            hs_die("cannot open the metrics file %s for writing: check log.metrics_file and checkpoint.save_dir",
                   metrics_path);
    }
}

double hs_meters_loss(const hs_meters *m, const hs_stats *s) {
    if (m->task && m->task->loss_from_stats) return m->task->loss_from_stats(s);
    return s->sample_count > 0 ? s->loss_sum / s->sample_count : 0.0;
}

static void task_fields(const hs_meters *m, const hs_stats *s, int json, char *buf, size_t n) {
    buf[0] = 0;
    if (m->task && m->task->format_stats) m->task->format_stats(s, json, buf, n);
}

static void add_stats(hs_stats *into, const hs_stats *s) {
    double *a = (double *)into;
    const double *b = (const double *)s;
    for (int i = 0; i < HS_STATS_NDOUBLE; i++) a[i] += b[i];
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
    /* Cumulative loss as HetSeq logs it: the sample-weighted average of the updates' losses. */
    st->meter_loss_sum += hs_meters_loss(m, global) * global->sample_count;
    st->meter_sample_count += global->sample_count;
    st->meter_gnorm_sum += gnorm;
    st->meter_clip_count += clipped ? 1 : 0;
    st->meter_updates += 1;
    st->train_wall += seconds;
    add_stats(&m->interval, global);
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
        const hs_stats *iv = &m->interval;
        double interval_loss = hs_meters_loss(m, iv);
        double sps = m->interval_time > 0 ? iv->sample_count / m->interval_time : 0;
        double tps = sps * (m->task ? m->task->tokens_per_sample : 0);
        double epoch_time = hs_now() - m->epoch_start_time;
        double ups = epoch_time > 0 ? (double)m->epoch_updates / epoch_time : 0;
        double bsz = m->interval_updates ? iv->sample_count / (double)m->interval_updates : 0;
        double gnorm = st->meter_updates > 0 ? st->meter_gnorm_sum / st->meter_updates : 0;
        double clip = st->meter_updates > 0 ? st->meter_clip_count / st->meter_updates : 0;
        double acc = iv->sample_count > 0 ? iv->correct / iv->sample_count : 0;
        char fields[512], jfields[512];
        task_fields(m, iv, 0, fields, sizeof fields);
        task_fields(m, iv, 1, jfields, sizeof jfields);
        char tokens[64] = "";
        if (tps > 0) snprintf(tokens, sizeof tokens, ", tps=%.0f", tps);
        if (!m->format || !strcmp(m->format, "simple"))
            printf("| epoch %03lld:  %5lld / %lld loss=%.3f, ppl=%g%s, sps=%.0f%s, ups=%.0f, bsz=%.3f, num_updates=%lld, "
               "lr=%g, gnorm=%.3f, clip=%.3f, acc=%.4f, wall=%.0f, train_wall=%.4f\n",
               (long long)st->epoch, (long long)index_in_epoch, (long long)updates_in_epoch, loss,
               round(pow(2.0, loss) * 100) / 100, fields, sps, tokens, ups, bsz, (long long)st->num_updates, lr, gnorm,
               clip, acc, hs_now() - m->start_time, st->train_wall);
        if (m->format && !strcmp(m->format, "json"))
            printf("{\"type\": \"train\", \"epoch\": %lld, \"num_updates\": %lld, \"loss\": %.6f, \"lr\": %.8g, "
                   "\"gnorm\": %.6f, \"samples_per_sec\": %.2f%s}\n",
                   (long long)st->epoch, (long long)st->num_updates, loss, lr, gnorm, sps, jfields);
        fflush(stdout);
        if (m->metrics) {
            fprintf(m->metrics,
                    "{\"type\": \"train\", \"epoch\": %lld, \"num_updates\": %lld, \"loss\": %.6f, "
                    "\"loss_nats_interval\": %.6f, \"accuracy_interval\": %.6f, \"lr\": %.8g, \"gnorm\": %.6f, "
                    "\"samples_per_sec\": %.2f, \"tokens_per_sec\": %.2f%s, \"world_size\": %d, \"wall\": %.3f}\n",
                    (long long)st->epoch, (long long)st->num_updates, loss, interval_loss, acc, lr, gnorm, sps, tps,
                    jfields, world_size, hs_now() - m->start_time);
            fflush(m->metrics);
        }
    }
    memset(&m->interval, 0, sizeof m->interval);
    m->interval_time = 0;
    m->interval_updates = 0;
}

void hs_meters_log_valid(hs_meters *m, const hs_train_state *st, const char *subset, const hs_stats *global,
                         double seconds) {
    if (hs_log_rank() != 0) return;
    double nats = hs_meters_loss(m, global);
    double acc = global->sample_count > 0 ? global->correct / global->sample_count : 0;
    char fields[512], jfields[512];
    task_fields(m, global, 0, fields, sizeof fields);
    task_fields(m, global, 1, jfields, sizeof jfields);
    printf("| epoch %03lld | valid on '%s' subset | loss %.3f | ppl %.2f | nll_loss %.4f | accuracy %.4f%s | "
           "samples %.0f | num_updates %lld | valid_wall %.2f\n",
           (long long)st->epoch, subset, bits(nats), pow(2.0, bits(nats)), nats, acc, fields, global->sample_count,
           (long long)st->num_updates, seconds);
    fflush(stdout);
    if (m->metrics) {
        fprintf(m->metrics,
                "{\"type\": \"valid\", \"epoch\": %lld, \"num_updates\": %lld, \"loss\": %.6f, \"nll_loss\": %.6f, "
                "\"accuracy\": %.6f%s, \"samples\": %.0f, \"wall\": %.3f}\n",
                (long long)st->epoch, (long long)st->num_updates, bits(nats), nats, acc, jfields,
                global->sample_count, hs_now() - m->start_time);
        fflush(m->metrics);
    }
}
