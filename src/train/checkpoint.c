/* HDF5 checkpoints: save (atomic: write "<name>.tmp", flush, fsync, rename, fsync the directory), load
 * with shape checks, pruning of old checkpoints. The layout is documented in docs/checkpoint-format.md;
 * every value is stored in its own IEEE type, so a save/load round trip is bit-exact. */

#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <hdf5.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_config.h" /* PACKAGE_VERSION */
#include "util/check.h"
#include "util/dirlist.h"
#include "util/fault.h"
#include "util/h5util.h"
#include "util/log.h"

#define HS_CKPT_FORMAT "hetseq-checkpoint"
#define HS_CKPT_VERSION 1

#define H5_HINT                                                                                          \
    "check free space and quota where the checkpoint lives; on NFS/Lustre set HDF5_USE_FILE_LOCKING=FALSE"

/* ---- hs_train_state <-> /train_state attributes --------------------------------------------- */

typedef enum { FIELD_I64, FIELD_F64, FIELD_U64 } field_kind;

typedef struct state_field {
    const char *name; /* attribute name = struct member name */
    field_kind kind;
    size_t offset;
    int optional;     /* absent in older checkpoints: read as 0 */
} state_field;

#define FIELD(member, kind) { #member, kind, offsetof(hs_train_state, member), 0 }
#define OPTIONAL_FIELD(member, kind) { #member, kind, offsetof(hs_train_state, member), 1 }
static const state_field state_fields[] = {
    FIELD(epoch, FIELD_I64),
    FIELD(updates_in_epoch, FIELD_I64),
    FIELD(num_updates, FIELD_I64),
    FIELD(end_of_epoch, FIELD_I64),
    FIELD(lr_base, FIELD_F64),
    FIELD(lr, FIELD_F64),
    FIELD(meter_loss_sum, FIELD_F64),
    FIELD(meter_sample_count, FIELD_F64),
    FIELD(meter_gnorm_sum, FIELD_F64),
    FIELD(meter_clip_count, FIELD_F64),
    FIELD(meter_updates, FIELD_F64),
    FIELD(train_wall, FIELD_F64),
    FIELD(seed, FIELD_U64),
    OPTIONAL_FIELD(world_size, FIELD_I64),
    OPTIONAL_FIELD(train_samples, FIELD_I64),
    OPTIONAL_FIELD(loss_scale, FIELD_F64),
    OPTIONAL_FIELD(loss_scale_good_steps, FIELD_I64),
    OPTIONAL_FIELD(loss_scale_skipped, FIELD_I64),
};
#undef FIELD
#undef OPTIONAL_FIELD
#define N_STATE_FIELDS ((int)(sizeof state_fields / sizeof state_fields[0]))

static hid_t field_file_type(field_kind k) {
    return k == FIELD_I64 ? H5T_STD_I64LE : k == FIELD_U64 ? H5T_STD_U64LE : H5T_IEEE_F64LE;
}
static hid_t field_mem_type(field_kind k) {
    return k == FIELD_I64 ? H5T_NATIVE_INT64 : k == FIELD_U64 ? H5T_NATIVE_UINT64 : H5T_NATIVE_DOUBLE;
}

/* ---- small HDF5 helpers ----------------------------------------------------------------------- */

/* Variable-length UTF-8 string type: h5py reads attributes of this type as str, datasets as bytes. */
static hid_t vlen_string_type(void) {
    hid_t t = (hid_t)HS_H5(H5Tcopy(H5T_C_S1), NULL);
    HS_H5(H5Tset_size(t, H5T_VARIABLE), NULL);
    HS_H5(H5Tset_cset(t, H5T_CSET_UTF8), NULL);
    return t;
}

static void write_scalar_attr(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *value) {
    hid_t space = (hid_t)HS_H5(H5Screate(H5S_SCALAR), NULL);
    hid_t attr = (hid_t)HS_H5(H5Acreate2(loc, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5_HINT);
    HS_H5(H5Awrite(attr, mem_type, value), H5_HINT);
    HS_H5(H5Aclose(attr), NULL);
    HS_H5(H5Sclose(space), NULL);
}

static void write_string_attr(hid_t loc, const char *name, const char *value) {
    hid_t t = vlen_string_type();
    write_scalar_attr(loc, name, t, t, &value);
    HS_H5(H5Tclose(t), NULL);
}

static void write_int64_attr(hid_t loc, const char *name, int64_t value) {
    write_scalar_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

/* Reads all of an attribute (is_attr) or a dataset into buf as mem_type. */
static void read_whole(hid_t obj, int is_attr, hid_t mem_type, void *buf) {
    if (is_attr) HS_H5(H5Aread(obj, mem_type, buf), H5_HINT);
    else HS_H5(H5Dread(obj, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), H5_HINT);
}

/* A string attribute or dataset (variable or fixed length; ftype its file type) as a malloc'd C
 * string; NULL if it is not a string. */
static char *read_string(hid_t obj, int is_attr, hid_t ftype) {
    if (H5Tget_class(ftype) != H5T_STRING) return NULL;
    char *out;
    if (HS_H5(H5Tis_variable_str(ftype), NULL) > 0) {
        hid_t mtype = vlen_string_type();
        char *s = NULL;
        read_whole(obj, is_attr, mtype, &s);
        out = HS_STRDUP(s ? s : "");
        if (s) HS_H5(H5free_memory(s), NULL);
        HS_H5(H5Tclose(mtype), NULL);
    } else {
        size_t n = H5Tget_size(ftype);
        hid_t mtype = (hid_t)HS_H5(H5Tcopy(H5T_C_S1), NULL);
        HS_H5(H5Tset_size(mtype, n + 1), NULL); /* room for the terminator of a NULLPAD string */
        HS_ALLOC(out, n + 1);
        read_whole(obj, is_attr, mtype, out);
        HS_H5(H5Tclose(mtype), NULL);
    }
    return out;
}

/* A string attribute as a malloc'd C string; NULL if it is absent or not a string. */
static char *read_string_attr(hid_t loc, const char *name) {
    if (HS_H5(H5Aexists(loc, name), H5_HINT) <= 0) return NULL;
    hid_t attr = (hid_t)HS_H5(H5Aopen(loc, name, H5P_DEFAULT), H5_HINT);
    hid_t ftype = (hid_t)HS_H5(H5Aget_type(attr), NULL);
    char *out = read_string(attr, 1, ftype);
    HS_H5(H5Tclose(ftype), NULL);
    HS_H5(H5Aclose(attr), NULL);
    return out;
}

/* A numeric scalar attribute converted to mem_type; 0 if absent. */
static int read_scalar_attr(hid_t loc, const char *name, hid_t mem_type, void *value) {
    if (HS_H5(H5Aexists(loc, name), H5_HINT) <= 0) return 0;
    hid_t attr = (hid_t)HS_H5(H5Aopen(loc, name, H5P_DEFAULT), H5_HINT);
    HS_H5(H5Aread(attr, mem_type, value), H5_HINT);
    HS_H5(H5Aclose(attr), NULL);
    return 1;
}

static int link_exists(hid_t loc, const char *name) { return HS_H5(H5Lexists(loc, name, H5P_DEFAULT), H5_HINT) > 0; }

static void disable_h5_error_printing(void) { HS_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL), NULL); }

/* ---- save ------------------------------------------------------------------------------------- */

/* Write every tensor of `flat` (a device buffer in the parameter table's layout) as loc/<name>
 * float32 with the tensor's shape; padding between tensors is not written. */
static void write_tensors(hid_t loc, const hs_params *params, const float *flat, float *host) {
    for (int i = 0; i < params->count; i++) {
        const hs_tensor_info *t = &params->tensors[i];
        hsize_t dims[HS_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) dims[d] = (hsize_t)t->shape[d];
        params->be->download(params->be, host, flat + t->offset, t->numel * sizeof(float));
        hid_t space = (hid_t)HS_H5(H5Screate_simple(t->ndim, dims, NULL), NULL);
        hid_t dset = (hid_t)HS_H5(H5Dcreate2(loc, t->name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                                             H5P_DEFAULT), H5_HINT);
        HS_H5(H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, host), H5_HINT);
        HS_H5(H5Dclose(dset), NULL);
        HS_H5(H5Sclose(space), NULL);
    }
}

static void write_float_dataset(hid_t loc, const char *name, int ndim, const int64_t *shape, const float *host) {
    hsize_t dims[HS_MAX_DIMS];
    for (int d = 0; d < ndim; d++) dims[d] = (hsize_t)shape[d];
    hid_t space = (hid_t)HS_H5(H5Screate_simple(ndim, dims, NULL), NULL);
    hid_t dset = (hid_t)HS_H5(H5Dcreate2(loc, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                              H5_HINT);
    HS_H5(H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, host), H5_HINT);
    HS_H5(H5Dclose(dset), NULL);
    HS_H5(H5Sclose(space), NULL);
}

/* The state_dict keys besides the table (tied weights under their second name, constant buffers), so a
 * PyTorch model loads /model with strict=True. */
static void write_state_dict_extras(hid_t model, const hs_params *params, float *host) {
    for (int i = 0; i < params->n_aliases; i++) {
        const hs_tensor_info *t = &params->tensors[params->aliases[i].target];
        params->be->download(params->be, host, params->data + t->offset, t->numel * sizeof(float));
        write_float_dataset(model, params->aliases[i].name, t->ndim, t->shape, host);
    }
    for (int i = 0; i < params->n_buffers; i++) {
        const hs_param_buffer *b = &params->buffers[i];
        write_float_dataset(model, b->name, b->ndim, b->shape, b->host);
    }
}

static void write_config_text(hid_t file, const char *text) {
    hid_t t = vlen_string_type();
    hid_t space = (hid_t)HS_H5(H5Screate(H5S_SCALAR), NULL);
    hid_t dset = (hid_t)HS_H5(H5Dcreate2(file, "config", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5_HINT);
    HS_H5(H5Dwrite(dset, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text), H5_HINT);
    HS_H5(H5Dclose(dset), NULL);
    HS_H5(H5Sclose(space), NULL);
    HS_H5(H5Tclose(t), NULL);
}

/* /task_state/<name>: the task's resume state (e.g. Transformer-XL's memories), float32 or int64. */
static void write_task_state(hid_t file, const hs_task_state *ts) {
    hid_t g = (hid_t)HS_H5(H5Gcreate2(file, "task_state", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5_HINT);
    for (int i = 0; i < ts->count; i++) {
        const hs_task_state_array *a = &ts->arrays[i];
        hsize_t dims[4];
        for (int d = 0; d < a->ndim; d++) dims[d] = (hsize_t)a->dims[d];
        hid_t space = (hid_t)HS_H5(H5Screate_simple(a->ndim, dims, NULL), NULL);
        hid_t dset = (hid_t)HS_H5(H5Dcreate2(g, a->name, a->is_int64 ? H5T_STD_I64LE : H5T_IEEE_F32LE, space,
                                             H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5_HINT);
        HS_H5(H5Dwrite(dset, a->is_int64 ? H5T_NATIVE_INT64 : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                       a->data), H5_HINT);
        HS_H5(H5Dclose(dset), NULL);
        HS_H5(H5Sclose(space), NULL);
    }
    HS_H5(H5Gclose(g), NULL);
}

/* /train_state/balance_shares: row 0 the shares of the next update, row 1 those from the update after
 * on (they differ when a re-balance has just happened: its shares skip the update already read). */
static void write_balance_shares(hid_t train_state, const hs_train_state *state) {
    hsize_t dims[2] = {2, (hsize_t)state->balance_ranks};
    hid_t space = (hid_t)HS_H5(H5Screate_simple(2, dims, NULL), NULL);
    hid_t dset = (hid_t)HS_H5(H5Dcreate2(train_state, "balance_shares", H5T_STD_I64LE, space, H5P_DEFAULT,
                                         H5P_DEFAULT, H5P_DEFAULT), H5_HINT);
    HS_H5(H5Dwrite(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, state->balance_shares), H5_HINT);
    HS_H5(H5Dclose(dset), NULL);
    HS_H5(H5Sclose(space), NULL);
}

static void write_checkpoint_file(const char *path, const hs_params *params, const hs_optimizer *opt,
                                  const hs_train_state *state, const char *config_text,
                                  const hs_task_state *task_state) {
    hid_t file = (hid_t)HS_H5(H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5_HINT);
    write_string_attr(file, "format", HS_CKPT_FORMAT);
    write_int64_attr(file, "version", HS_CKPT_VERSION);
    write_string_attr(file, "hetseq_version", PACKAGE_VERSION);

    float *host;
    HS_ALLOC(host, hs_params_max_numel(params));

    hid_t model = (hid_t)HS_H5(H5Gcreate2(file, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5_HINT);
    write_tensors(model, params, params->data, host);
    write_state_dict_extras(model, params, host);
    HS_H5(H5Gclose(model), NULL);
    if (state && hs_fault_fires(HS_FAULT_CKPT_DIE, state->num_updates)) {
        HS_H5(H5Fflush(file, H5F_SCOPE_GLOBAL), H5_HINT); /* a realistic half-written file */
        raise(SIGKILL);
    }

    if (opt) {
        hid_t og = (hid_t)HS_H5(H5Gcreate2(file, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5_HINT);
        write_string_attr(og, "name", opt->name);
        write_int64_attr(og, "step", opt->step);
        for (int s = 0; s < opt->n_states; s++) {
            hid_t sg = (hid_t)HS_H5(H5Gcreate2(og, opt->state_names[s], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                    H5_HINT);
            write_tensors(sg, params, opt->state[s], host);
            HS_H5(H5Gclose(sg), NULL);
        }
        HS_H5(H5Gclose(og), NULL);
    }
    free(host);

    if (state) {
        hid_t sg = (hid_t)HS_H5(H5Gcreate2(file, "train_state", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5_HINT);
        for (int f = 0; f < N_STATE_FIELDS; f++)
            write_scalar_attr(sg, state_fields[f].name, field_file_type(state_fields[f].kind),
                              field_mem_type(state_fields[f].kind), (const char *)state + state_fields[f].offset);
        if (state->balance_shares && state->balance_ranks > 0) write_balance_shares(sg, state);
        HS_H5(H5Gclose(sg), NULL);
    }

    if (task_state && task_state->count > 0) write_task_state(file, task_state);
    write_config_text(file, config_text ? config_text : "");

    HS_H5(H5Fflush(file, H5F_SCOPE_GLOBAL), H5_HINT);
    HS_H5(H5Fclose(file), H5_HINT);
}

/* mkdir -p: create dir and its missing parents. */
static void make_directories(const char *dir) {
    char *path = HS_STRDUP(dir);
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') path[--len] = '\0';
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            hs_die("cannot create the checkpoint directory '%s' (%s): %s; set checkpoint.save_dir to a writable "
                   "directory", dir, path, strerror(errno));
        *p = saved;
        if (saved == '\0') break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        hs_die("checkpoint directory '%s' is not a directory; set checkpoint.save_dir to a directory", dir);
    free(path);
}

static void fsync_path(const char *path, int flags, const char *what) {
    int fd = open(path, flags);
    if (fd < 0) hs_die("cannot open %s '%s' to sync it: %s", what, path, strerror(errno));
    if (fsync(fd) != 0) hs_die("cannot sync %s '%s' to disk: %s (is the file system full?)", what, path, strerror(errno));
    if (close(fd) != 0) hs_die("cannot close %s '%s': %s", what, path, strerror(errno));
}

static void remove_temporary(void *path) {
    if (unlink((const char *)path) == 0)
        fprintf(stderr, "hetseq: removed the incomplete checkpoint %s\n", (const char *)path);
}

/* The `enospc` fault: a file-size limit makes the file system refuse the checkpoint's writes (EFBIG,
 * as ENOSPC would on a full disk), so the failure travels the real path through HDF5. */
static void arm_write_failure(void) {
    struct rlimit lim = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
    signal(SIGXFSZ, SIG_IGN); /* the failed write returns EFBIG instead of killing the process */
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) hs_die("fault injection: setrlimit failed: %s", strerror(errno));
}

void hs_checkpoint_save(const char *dir, const char *name, const hs_params *params, const hs_optimizer *opt,
                        const hs_train_state *state, const char *config_text) {
    hs_checkpoint_save_with_task(dir, name, params, opt, state, config_text, NULL);
}

void hs_checkpoint_save_with_task(const char *dir, const char *name, const hs_params *params,
                                  const hs_optimizer *opt, const hs_train_state *state, const char *config_text,
                                  const hs_task_state *task_state) {
    hs_h5_lock(); /* the prefetch thread may be inside HDF5 */
    disable_h5_error_printing();
    if (!dir || !*dir) dir = ".";
    make_directories(dir);
    if (access(dir, W_OK | X_OK) != 0)
        hs_die("checkpoint directory '%s' is not writable (%s); set checkpoint.save_dir to a writable directory",
               dir, strerror(errno));

    char *final_path = hs_path_join(dir, name);
    size_t n = strlen(final_path) + 5;
    char *tmp_path;
    HS_ALLOC(tmp_path, n);
    snprintf(tmp_path, n, "%s.tmp", final_path);

    if (params->be) params->be->synchronize(params->be);
    hs_check_on_fatal(remove_temporary, tmp_path); /* a failed write leaves no half file behind */
    if (state && hs_fault_fires(HS_FAULT_ENOSPC, state->num_updates)) arm_write_failure();
    write_checkpoint_file(tmp_path, params, opt, state, config_text, task_state);
    /* The data must be on disk before the rename makes it visible under the final name, and the
     * rename itself must reach the disk (directory fsync) before the save counts as done. */
    fsync_path(tmp_path, O_RDONLY, "checkpoint");
    if (rename(tmp_path, final_path) != 0)
        hs_die("cannot rename '%s' to '%s': %s", tmp_path, final_path, strerror(errno));
    hs_check_on_fatal(NULL, NULL);
    fsync_path(dir, O_RDONLY | O_DIRECTORY, "checkpoint directory");
    free(tmp_path);
    free(final_path);
    hs_h5_unlock();
}

/* Copy src to dst byte for byte (for file systems without hard links). */
static void copy_file(const char *src, const char *dst) {
    int in = open(src, O_RDONLY);
    if (in < 0) hs_die("cannot open checkpoint '%s' to copy it: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) hs_die("cannot create '%s': %s; check checkpoint.save_dir", dst, strerror(errno));
    char buf[1 << 16];
    for (;;) {
        ssize_t got = read(in, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) hs_die("cannot read checkpoint '%s': %s", src, strerror(errno));
        if (got == 0) break;
        for (ssize_t done = 0; done < got;) {
            ssize_t put = write(out, buf + done, (size_t)(got - done));
            if (put < 0 && errno == EINTR) continue;
            if (put < 0) hs_die("cannot write '%s': %s (is the file system full?)", dst, strerror(errno));
            done += put;
        }
    }
    if (fsync(out) != 0) hs_die("cannot sync '%s' to disk: %s (is the file system full?)", dst, strerror(errno));
    if (close(out) != 0 || close(in) != 0) hs_die("cannot close '%s': %s", dst, strerror(errno));
}

void hs_checkpoint_link(const char *dir, const char *name, const char *alias) {
    if (!dir || !*dir) dir = ".";
    char *src = hs_path_join(dir, name), *dst = hs_path_join(dir, alias);
    size_t n = strlen(dst) + 5;
    char *tmp;
    HS_ALLOC(tmp, n);
    snprintf(tmp, n, "%s.tmp", dst);
    unlink(tmp); /* a leftover of an earlier crash */
    hs_check_on_fatal(remove_temporary, tmp);
    /* A hard link costs nothing; where the file system has none (some object stores), copy. */
    if (link(src, tmp) != 0) copy_file(src, tmp);
    if (rename(tmp, dst) != 0) hs_die("cannot rename '%s' to '%s': %s", tmp, dst, strerror(errno));
    hs_check_on_fatal(NULL, NULL);
    fsync_path(dir, O_RDONLY | O_DIRECTORY, "checkpoint directory");
    free(tmp);
    free(src);
    free(dst);
}

/* ---- load ------------------------------------------------------------------------------------- */

static void format_shape(char *buf, size_t size, int ndim, const hsize_t *dims) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%llu", d ? ", " : "", (unsigned long long)dims[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

/* Open the file read-only after checking it exists, is HDF5 and carries the hetseq format marker. */
static hid_t open_checkpoint(const char *path) {
    disable_h5_error_printing();
    if (!hs_file_exists(path))
        hs_die("checkpoint '%s' does not exist or is not a readable file", path);
    htri_t is_h5 = H5Fis_hdf5(path);
    if (is_h5 <= 0) hs_die("'%s' is not an HDF5 file, so not a hetseq checkpoint", path);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); /* checked: a damaged file is a user error */
    if (file < 0)
        hs_die("checkpoint '%s' is damaged or truncated: HDF5 cannot open it (an interrupted copy? on NFS/Lustre "
               "also try HDF5_USE_FILE_LOCKING=FALSE)", path);
    char *format = read_string_attr(file, "format");
    if (!format || strcmp(format, HS_CKPT_FORMAT) != 0)
        hs_die("'%s' is an HDF5 file but not a hetseq checkpoint (root attribute format = \"%s\" missing); "
               "see docs/checkpoint-format.md for the layout", path, HS_CKPT_FORMAT);
    free(format);
    int64_t version = 0;
    if (!read_scalar_attr(file, "version", H5T_NATIVE_INT64, &version) || version < 1)
        hs_die("checkpoint '%s' has no valid version attribute", path);
    if (version > HS_CKPT_VERSION)
        hs_die("checkpoint '%s' has format version %lld; this hetseq (" PACKAGE_VERSION ") reads version %d: "
               "use a newer hetseq", path, (long long)version, HS_CKPT_VERSION);
    return file;
}

/* Read loc/<name> for every tensor of the table into `flat` (device, table layout), checking shapes.
 * `where` names the group in messages ("/model", "/optimizer/exp_avg"). */
static void read_tensors(const char *path, hid_t loc, const char *where, const hs_params *params, float *flat,
                         float *host) {
    for (int i = 0; i < params->count; i++) {
        const hs_tensor_info *t = &params->tensors[i];
        if (!link_exists(loc, t->name))
            hs_die("checkpoint '%s' has no tensor %s/%s that this model needs (a checkpoint of another model?)",
                   path, where, t->name);
        hid_t dset = (hid_t)HS_H5(H5Dopen2(loc, t->name, H5P_DEFAULT), H5_HINT);
        hid_t space = (hid_t)HS_H5(H5Dget_space(dset), H5_HINT);
        hid_t ftype = (hid_t)HS_H5(H5Dget_type(dset), H5_HINT);
        int ndim = (int)HS_H5(H5Sget_simple_extent_ndims(space), H5_HINT);
        hsize_t dims[H5S_MAX_RANK], want[HS_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) want[d] = (hsize_t)t->shape[d];
        int same = ndim == t->ndim;
        if (ndim > 0 && ndim <= H5S_MAX_RANK) HS_H5(H5Sget_simple_extent_dims(space, dims, NULL), H5_HINT);
        for (int d = 0; same && d < ndim; d++) same = dims[d] == want[d];
        if (!same) {
            char have_s[256], want_s[256];
            format_shape(have_s, sizeof have_s, ndim, dims);
            format_shape(want_s, sizeof want_s, t->ndim, want);
            hs_die("checkpoint '%s': tensor %s/%s has shape %s but the model expects %s (a checkpoint of "
                   "another model or configuration?)", path, where, t->name, have_s, want_s);
        }
        if (H5Tget_class(ftype) != H5T_FLOAT)
            hs_die("checkpoint '%s': tensor %s/%s is not floating point", path, where, t->name);
        HS_H5(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, host), H5_HINT);
        params->be->upload(params->be, flat + t->offset, host, t->numel * sizeof(float));
        HS_H5(H5Tclose(ftype), NULL);
        HS_H5(H5Sclose(space), NULL);
        HS_H5(H5Dclose(dset), NULL);
    }
}

static void read_optimizer(const char *path, hid_t file, hs_optimizer *opt, float *host) {
    if (!link_exists(file, "optimizer"))
        hs_die("checkpoint '%s' holds no optimizer state (weights only); set checkpoint.reset_optimizer = true "
               "to start a fresh optimizer from its weights", path);
    hid_t og = (hid_t)HS_H5(H5Gopen2(file, "optimizer", H5P_DEFAULT), H5_HINT);
    char *name = read_string_attr(og, "name");
    if (!name) hs_die("checkpoint '%s': /optimizer has no name attribute", path);
    if (strcmp(name, opt->name) != 0)
        hs_die("checkpoint '%s' holds the state of optimizer \"%s\" but optimizer.name is \"%s\"; set "
               "checkpoint.reset_optimizer = true to start a fresh \"%s\" from the checkpoint's weights",
               path, name, opt->name, opt->name);
    free(name);
    int64_t step;
    if (!read_scalar_attr(og, "step", H5T_NATIVE_INT64, &step))
        hs_die("checkpoint '%s': /optimizer has no step attribute", path);
    for (int s = 0; s < opt->n_states; s++) {
        char where[HS_NAME_MAX + 16];
        snprintf(where, sizeof where, "/optimizer/%s", opt->state_names[s]);
        if (!link_exists(og, opt->state_names[s]))
            hs_die("checkpoint '%s' has no optimizer state %s; set checkpoint.reset_optimizer = true to start a "
                   "fresh optimizer", path, where);
        hid_t sg = (hid_t)HS_H5(H5Gopen2(og, opt->state_names[s], H5P_DEFAULT), H5_HINT);
        read_tensors(path, sg, where, opt->params, opt->state[s], host);
        HS_H5(H5Gclose(sg), NULL);
    }
    opt->step = step;
    HS_H5(H5Gclose(og), NULL);
}

static void read_train_state(const char *path, hid_t file, hs_train_state *state) {
    if (!link_exists(file, "train_state"))
        hs_die("checkpoint '%s' has no /train_state (weights only); it can initialise a model "
               "(checkpoint.init_checkpoint) but not resume a run", path);
    hid_t sg = (hid_t)HS_H5(H5Gopen2(file, "train_state", H5P_DEFAULT), H5_HINT);
    for (int f = 0; f < N_STATE_FIELDS; f++)
        if (!read_scalar_attr(sg, state_fields[f].name, field_mem_type(state_fields[f].kind),
                              (char *)state + state_fields[f].offset) &&
            !state_fields[f].optional)
            hs_die("checkpoint '%s': /train_state has no attribute %s", path, state_fields[f].name);
    HS_H5(H5Gclose(sg), NULL);
}

/* The /config text, malloc'd; NULL if the file has none. */
static char *read_config_text(hid_t file) {
    if (!link_exists(file, "config")) return NULL;
    hid_t dset = (hid_t)HS_H5(H5Dopen2(file, "config", H5P_DEFAULT), H5_HINT);
    hid_t ftype = (hid_t)HS_H5(H5Dget_type(dset), H5_HINT);
    char *out = read_string(dset, 0, ftype);
    HS_H5(H5Tclose(ftype), NULL);
    HS_H5(H5Dclose(dset), NULL);
    return out;
}

void hs_checkpoint_load(const char *path, hs_params *params, hs_optimizer *opt, hs_train_state *state,
                        char **config_text) {
    hs_h5_lock();
    hid_t file = open_checkpoint(path);
    float *host;
    HS_ALLOC(host, hs_params_max_numel(params));

    if (!link_exists(file, "model")) hs_die("checkpoint '%s' has no /model group", path);
    hid_t model = (hid_t)HS_H5(H5Gopen2(file, "model", H5P_DEFAULT), H5_HINT);
    read_tensors(path, model, "/model", params, params->data, host);
    HS_H5(H5Gclose(model), NULL);

    if (opt) {
        hs_optimizer view = *opt; /* the state buffers share the table of `params` */
        view.params = params;
        read_optimizer(path, file, &view, host);
        opt->step = view.step;
    }
    free(host);
    if (state) read_train_state(path, file, state);
    if (config_text) *config_text = read_config_text(file);
    HS_H5(H5Fclose(file), H5_HINT);
    hs_h5_unlock();
    if (params->be) params->be->synchronize(params->be);
}

void hs_checkpoint_read_state(const char *path, hs_train_state *state, char **config_text) {
    hs_h5_lock();
    hid_t file = open_checkpoint(path);
    read_train_state(path, file, state);
    *config_text = read_config_text(file);
    HS_H5(H5Fclose(file), H5_HINT);
    hs_h5_unlock();
}

void hs_checkpoint_read_task_state(const char *path, hs_task_state *out) {
    memset(out, 0, sizeof *out);
    hs_h5_lock();
    hid_t file = open_checkpoint(path);
    if (link_exists(file, "task_state")) {
        hid_t g = (hid_t)HS_H5(H5Gopen2(file, "task_state", H5P_DEFAULT), H5_HINT);
        H5G_info_t info;
        HS_H5(H5Gget_info(g, &info), H5_HINT);
        if (info.nlinks > HS_TASK_STATE_MAX)
            hs_die("checkpoint '%s': /task_state holds %llu arrays, more than this hetseq reads (%d)", path,
                   (unsigned long long)info.nlinks, HS_TASK_STATE_MAX);
        for (hsize_t i = 0; i < info.nlinks; i++) {
            hs_task_state_array *a = &out->arrays[out->count];
            ssize_t len = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, a->name, sizeof a->name,
                                             H5P_DEFAULT);
            if (len < 0 || (size_t)len >= sizeof a->name)
                hs_die("checkpoint '%s': a /task_state entry has no readable name (or one longer than %zu bytes)",
                       path, sizeof a->name - 1);
            hid_t dset = H5Dopen2(g, a->name, H5P_DEFAULT);
            if (dset < 0) hs_die("checkpoint '%s': /task_state/%s is not a dataset", path, a->name);
            hid_t type = (hid_t)HS_H5(H5Dget_type(dset), H5_HINT);
            H5T_class_t cls = H5Tget_class(type);
            if (cls != H5T_INTEGER && cls != H5T_FLOAT)
                hs_die("checkpoint '%s': /task_state/%s is neither integer nor float", path, a->name);
            a->is_int64 = cls == H5T_INTEGER;
            HS_H5(H5Tclose(type), NULL);
            hid_t space = (hid_t)HS_H5(H5Dget_space(dset), H5_HINT);
            int ndim = H5Sget_simple_extent_ndims(space);
            if (ndim < 0 || ndim > 4) hs_die("checkpoint '%s': /task_state/%s has %d dimensions (at most 4)", path, a->name, ndim);
            hsize_t dims[4] = {0};
            HS_H5(H5Sget_simple_extent_dims(space, dims, NULL), H5_HINT);
            size_t n = 1;
            a->ndim = ndim;
            for (int d = 0; d < ndim; d++) {
                a->dims[d] = (int64_t)dims[d];
                n *= (size_t)dims[d];
            }
            size_t elem = a->is_int64 ? sizeof(int64_t) : sizeof(float);
            a->data = hs_xcalloc(n ? n : 1, elem, __FILE__, __LINE__);
            if (n) HS_H5(H5Dread(dset, a->is_int64 ? H5T_NATIVE_INT64 : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                 a->data), H5_HINT);
            HS_H5(H5Sclose(space), NULL);
            HS_H5(H5Dclose(dset), NULL);
            out->count++;
        }
        HS_H5(H5Gclose(g), NULL);
    }
    HS_H5(H5Fclose(file), H5_HINT);
    hs_h5_unlock();
}

int hs_checkpoint_read_balance_shares(const char *path, int64_t ranks, int64_t *rows) {
    hs_h5_lock();
    hid_t file = open_checkpoint(path);
    int found = 0;
    if (link_exists(file, "train_state") && link_exists(file, "train_state/balance_shares")) {
        hid_t dset = (hid_t)HS_H5(H5Dopen2(file, "train_state/balance_shares", H5P_DEFAULT), H5_HINT);
        hid_t space = (hid_t)HS_H5(H5Dget_space(dset), H5_HINT);
        hsize_t dims[2] = {0, 0};
        int nd = (int)HS_H5(H5Sget_simple_extent_ndims(space), H5_HINT);
        if (nd != 2) hs_die("checkpoint '%s': /train_state/balance_shares has %d dimension(s), not 2 (2 x ranks)", path, nd);
        HS_H5(H5Sget_simple_extent_dims(space, dims, NULL), H5_HINT);
        if (dims[0] != 2)
            hs_die("checkpoint '%s': /train_state/balance_shares has %llu rows, not 2", path, (unsigned long long)dims[0]);
        if ((int64_t)dims[1] == ranks) {
            HS_H5(H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows), H5_HINT);
            for (int64_t i = 0; i < 2 * ranks; i++)
                if (rows[i] < 1)
                    hs_die("checkpoint '%s': /train_state/balance_shares holds %lld; shares are integer weights >= 1 "
                           "(delete the dataset with h5py to learn the shares again)", path, (long long)rows[i]);
            found = 1;
        }
        HS_H5(H5Sclose(space), NULL);
        HS_H5(H5Dclose(dset), NULL);
    }
    HS_H5(H5Fclose(file), H5_HINT);
    hs_h5_unlock();
    return found;
}

void hs_checkpoint_contents(const char *path, int *has_optimizer, int *has_train_state) {
    hs_h5_lock();
    hid_t file = open_checkpoint(path);
    *has_optimizer = link_exists(file, "optimizer");
    *has_train_state = link_exists(file, "train_state");
    HS_H5(H5Fclose(file), H5_HINT);
    hs_h5_unlock();
}

char *hs_checkpoint_read_config(const char *path) {
    hs_h5_lock();
    hid_t file = open_checkpoint(path);
    char *text = read_config_text(file);
    HS_H5(H5Fclose(file), H5_HINT);
    hs_h5_unlock();
    if (!text) hs_die("checkpoint '%s' holds no /config text", path);
    return text;
}

/* ---- pruning ---------------------------------------------------------------------------------- */

/* HetSeq's two numbered kinds: checkpoint<epoch>.h5 (end of epoch) and checkpoint_<epoch>_<updates>.h5
 * (mid-epoch), each ordered by its last number. */
enum { KIND_EPOCH = 0, KIND_UPDATES = 1, N_KINDS = 2 };

typedef struct numbered_file {
    char *name;
    long long number;
} numbered_file;

/* Digits at *s (at least one) into *out; advances *s. */
static int parse_digits(const char **s, long long *out) {
    const char *p = *s;
    long long v = 0;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') {
        if (v > (LLONG_MAX - 9) / 10) return 0;
        v = v * 10 + (*p++ - '0');
    }
    *s = p;
    *out = v;
    return 1;
}

/* Kind of a file name and its ordering number; -1 if it is not a numbered checkpoint. */
static int classify(const char *name, long long *number) {
    static const char prefix[] = "checkpoint";
    if (strncmp(name, prefix, sizeof prefix - 1) != 0) return -1;
    const char *p = name + sizeof prefix - 1;
    long long first, second;
    int kind;
    if (*p == '_') {
        p++;
        if (!parse_digits(&p, &first) || *p++ != '_' || !parse_digits(&p, &second)) return -1;
        kind = KIND_UPDATES;
        *number = second;
    } else {
        if (!parse_digits(&p, &first)) return -1;
        kind = KIND_EPOCH;
        *number = first;
    }
    return strcmp(p, ".h5") == 0 ? kind : -1;
}

static int by_number_descending(const void *a, const void *b) {
    const numbered_file *x = a, *y = b;
    if (x->number != y->number) return x->number < y->number ? 1 : -1;
    return strcmp(y->name, x->name); /* equal numbers: a fixed order */
}

void hs_checkpoint_prune(const char *dir, int keep) {
    if (keep <= 0) return;
    DIR *d = opendir(dir);
    if (!d) {
        hs_warn("cannot list checkpoint directory '%s' to remove old checkpoints: %s", dir, strerror(errno));
        return;
    }
    numbered_file *files[N_KINDS] = {NULL, NULL};
    int count[N_KINDS] = {0, 0}, cap[N_KINDS] = {0, 0};
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long long number;
        int kind = classify(e->d_name, &number);
        if (kind < 0) continue;
        if (count[kind] == cap[kind]) {
            cap[kind] = cap[kind] ? 2 * cap[kind] : 16;
            HS_REALLOC(files[kind], cap[kind]);
        }
        files[kind][count[kind]].name = HS_STRDUP(e->d_name);
        files[kind][count[kind]].number = number;
        count[kind]++;
    }
    closedir(d);
    for (int k = 0; k < N_KINDS; k++) {
        if (count[k] > 0) qsort(files[k], (size_t)count[k], sizeof files[k][0], by_number_descending);
        for (int i = 0; i < count[k]; i++) {
            if (i >= keep) {
                char *path = hs_path_join(dir, files[k][i].name);
                if (unlink(path) != 0 && errno != ENOENT)
                    hs_warn("cannot remove old checkpoint '%s': %s", path, strerror(errno));
                free(path);
            }
            free(files[k][i].name);
        }
        free(files[k]);
    }
}

void hs_checkpoint_remove_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return; /* no directory yet: nothing stale */
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 7, ".h5.tmp") != 0 || strncmp(e->d_name, "checkpoint", 10) != 0) continue;
        char *path = hs_path_join(dir, e->d_name);
        if (unlink(path) == 0) hs_log("| removed %s, left by a run that was killed while saving", path);
        free(path);
    }
    closedir(d);
}

int hs_file_exists(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}
