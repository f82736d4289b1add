/* The MNIST task: HetSeq's MNISTNet on an MNIST-format HDF5 file (`hetseq prep mnist`).
 * Host micro-batch layout: images uint8[count,28,28] followed by labels uint8[count]. */
#include <stdlib.h>
#include <string.h>

#include "data/mnist.h"
#include "models/cnn.h"
#include "tasks/model_flops.h"
#include "tasks/task.h"
#include "util/check.h"
#include "util/log.h"

typedef struct mnist_task {
    hs_mnist_file *file;
    hs_cnn *model;
    const hs_backend *be;
    int max_batch;
    float input_scale, input_shift; /* x = byte/255; (x - mean)/std = byte*scale + shift */
    uint8_t *images_dev;  /* [max_batch*784] */
    float *input_dev;     /* x[max_batch,1,28,28] */
    int32_t *labels_host; /* [max_batch] */
    int32_t *labels_dev;  /* [max_batch] */
    hs_input_sets staged; /* the stage hook's sets; data: mnist_inputs */
} mnist_task;

/* A staged micro-batch: its bytes and labels on the device, the labels widened in staging memory. */
typedef struct mnist_inputs {
    int count;
    uint8_t *images_dev;  /* [max_batch*784] */
    int32_t *labels_dev;  /* [max_batch] */
    int32_t *labels_host; /* [max_batch] */
} mnist_inputs;

static int split_index(hs_split split) { return split == HS_SPLIT_TRAIN ? 0 : 1; }

static int64_t mnist_num_samples(hs_task *t, hs_split split) {
    mnist_task *m = t->impl;
    return hs_mnist_num_samples(m->file, split_index(split));
}

static size_t mnist_batch_bytes(hs_task *t, int max_count) {
    (void)t;
    return (size_t)max_count * (HS_MNIST_PIXELS + 1);
}

static void mnist_read_batch(hs_task *t, hs_split split, int64_t first, int count, void *host_buf) {
    mnist_task *m = t->impl;
    uint8_t *images = host_buf;
    hs_mnist_read(m->file, split_index(split), first, count, images, images + (size_t)count * HS_MNIST_PIXELS);
}

/* Check the labels of a host micro-batch (the loss op indexes with them and never checks), upload it
 * and normalise it: input_dev[B,1,28,28], labels_dev[B]. */
static const uint8_t *checked_labels(const void *host_buf, int count) {
    const uint8_t *labels = (const uint8_t *)host_buf + (size_t)count * HS_MNIST_PIXELS;
    for (int i = 0; i < count; i++)
        if (labels[i] >= HS_MNIST_CLASSES)
            hs_die("label %d of sample %d in this batch is outside [0, %d): the data file's labels do not match the "
                   "model's %d classes; check the dataset (re-run `hetseq prep`)",
                   (int)labels[i], i, HS_MNIST_CLASSES, HS_MNIST_CLASSES);
    return labels;
}

static void stage_batch(mnist_task *m, const void *host_buf, int count) {
    const uint8_t *images = host_buf;
    const uint8_t *labels = checked_labels(host_buf, count);
    size_t n = (size_t)count * HS_MNIST_PIXELS;
    m->be->upload(m->be, m->images_dev, images, n);
    m->be->u8_to_float(m->be, m->input_dev, m->images_dev, n, m->input_scale, m->input_shift);
    for (int i = 0; i < count; i++) m->labels_host[i] = labels[i];
    m->be->upload(m->be, m->labels_dev, m->labels_host, (size_t)count * sizeof(int32_t));
}

static void mnist_batch_norm_counts(hs_task *t, const void *host_buf, int count, double counts[HS_NORM_TERMS]) {
    (void)t;
    (void)host_buf;
    counts[0] = count; /* NLL is averaged over samples */
    counts[1] = 0;
}

static void *mnist_inputs_create(void *owner) {
    const mnist_task *m = owner;
    mnist_inputs *in;
    HS_ALLOC(in, 1);
    in->images_dev = m->be->alloc(m->be, (size_t)m->max_batch * HS_MNIST_PIXELS);
    in->labels_dev = m->be->alloc(m->be, (size_t)m->max_batch * sizeof(int32_t));
    in->labels_host = m->be->host_alloc(m->be, (size_t)m->max_batch * sizeof(int32_t));
    return in;
}

static void mnist_inputs_destroy(void *owner, void *data) {
    const mnist_task *m = owner;
    mnist_inputs *in = data;
    m->be->free(m->be, in->images_dev);
    m->be->free(m->be, in->labels_dev);
    m->be->host_free(m->be, in->labels_host);
    free(in);
}

/* The stage hook: the checks of stage_batch, then the uploads into a staged set on the copy stream. */
static void mnist_stage(hs_task *t, const void *host_buf, int count, int micro_index, int parity) {
    mnist_task *m = t->impl;
    const uint8_t *labels = checked_labels(host_buf, count);
    hs_input_set *set = hs_input_sets_begin(&m->staged, parity, micro_index);
    mnist_inputs *in = set->data;
    for (int i = 0; i < count; i++) in->labels_host[i] = labels[i];
    m->be->upload_async(m->be, in->images_dev, host_buf, (size_t)count * HS_MNIST_PIXELS);
    m->be->upload_async(m->be, in->labels_dev, in->labels_host, (size_t)count * sizeof(int32_t));
    in->count = count;
    hs_input_sets_end(&m->staged, set, host_buf, count);
}

/* A staged set into the model's inputs, as stage_batch leaves them (after the uploads: the caller's wait). */
static void take_inputs(mnist_task *m, const mnist_inputs *in) {
    size_t n = (size_t)in->count * HS_MNIST_PIXELS;
    m->be->u8_to_float(m->be, m->input_dev, in->images_dev, n, m->input_scale, m->input_shift);
    m->be->copy(m->be, m->labels_dev, in->labels_dev, (size_t)in->count * sizeof(int32_t));
}

static void mnist_forward_backward(hs_task *t, const void *host_buf, int64_t first, int count,
                                   const hs_step_ctx *ctx, double *stats) {
    mnist_task *m = t->impl;
    hs_input_set *set = hs_input_sets_take(&m->staged, host_buf, count);
    if (set) {
        take_inputs(m, set->data);
        hs_input_sets_done(&m->staged, set);
    } else {
        stage_batch(m, host_buf, count);
    }
    hs_cnn_forward_backward(m->model, m->input_dev, m->labels_dev, count, first, ctx, stats);
}

static void mnist_evaluate(hs_task *t, const void *host_buf, int64_t first, int count, double *stats) {
    (void)first;
    mnist_task *m = t->impl;
    stage_batch(m, host_buf, count);
    hs_cnn_evaluate(m->model, m->input_dev, m->labels_dev, count, stats);
}

static void mnist_init_params(hs_task *t, uint64_t seed) {
    mnist_task *m = t->impl;
    hs_cnn_init_params(m->model, seed);
}

static void mnist_destroy(hs_task *t) {
    mnist_task *m = t->impl;
    hs_input_sets_free(&m->staged);
    hs_cnn_free(m->model);
    hs_params_free(&t->params);
    m->be->free(m->be, m->images_dev);
    m->be->free(m->be, m->input_dev);
    m->be->free(m->be, m->labels_dev);
    m->be->host_free(m->be, m->labels_host);
    hs_mnist_close(m->file);
    free(m);
    free(t);
}

static double mnist_flops_per_sample(hs_task *t) {
    (void)t;
    return hs_cnn_train_flops_per_image();
}

hs_task *hs_mnist_task_create(const hs_task_settings *s, const hs_comm *comm, const hs_backend *be) {
    const char *path = s->data_path;
    if (!*path)
        hs_die_all("data.path is empty: set it to the HDF5 file made by `hetseq prep mnist --in DIR --out FILE.h5`");
    const char *valid = s->valid_subset;
    if (strcmp(valid, "valid") != 0 && strcmp(valid, "test") != 0)
        hs_die_all("data.valid_subset = \"%s\": the MNIST file has a train and a test split; use \"test\" (or \"valid\", "
                   "which means the same)",
                   valid);
    const double std = s->data_std;
    if (std <= 0) hs_die_all("data.std = %g must be > 0", std);

    hs_task *t;
    mnist_task *m;
    HS_ALLOC(t, 1);
    HS_ALLOC(m, 1);
    t->name = "mnist";
    t->impl = m;
    m->be = be;
    m->max_batch = s->max_sentences;
    m->input_scale = (float)(1.0 / (255.0 * std));
    m->input_shift = (float)(-s->data_mean / std);
    m->file = hs_mnist_open(path, comm->io);
    m->model = hs_cnn_create(&t->params, m->max_batch, (float)s->conv_dropout, (float)s->fc_dropout);
    hs_params_allocate(&t->params, be);
    hs_cnn_setup(m->model);
    m->images_dev = be->alloc(be, (size_t)m->max_batch * HS_MNIST_PIXELS);
    m->input_dev = be->alloc(be, (size_t)m->max_batch * HS_MNIST_PIXELS * sizeof(float));
    m->labels_dev = be->alloc(be, (size_t)m->max_batch * sizeof(int32_t));
    m->labels_host = be->host_alloc(be, (size_t)m->max_batch * sizeof(int32_t)); /* staging (page-locked on CUDA) */

    t->num_samples = mnist_num_samples;
    t->batch_bytes = mnist_batch_bytes;
    t->read_batch = mnist_read_batch;
    t->batch_norm_counts = mnist_batch_norm_counts;
    t->forward_backward = mnist_forward_backward;
    t->stage = mnist_stage;
    m->staged = (hs_input_sets){.be = be, .owner = m, .create = mnist_inputs_create, .destroy = mnist_inputs_destroy};
    t->evaluate = mnist_evaluate;
    t->init_params = mnist_init_params;
    t->extra_stat_names = NULL;
    t->has_test_split = 0; /* HetSeq validates on MNIST's test images: they are the validation split */
    t->flops_per_sample = mnist_flops_per_sample;
    t->destroy = mnist_destroy;
    return t;
}
