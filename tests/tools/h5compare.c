/* Compares the /model tensors of two hetseq checkpoints, as a user checking that two runs agree:
 *   h5compare A.h5 B.h5 TOL [ELEMENT_TOL]
 * Prints ||a-b|| / ||a|| and max |a-b| of every tensor. Passes when the whole parameter vector agrees
 * within TOL relative (||a-b|| / ||a|| over all tensors) and no element differs by more than ELEMENT_TOL
 * (default TOL) times the largest parameter magnitude (a per-tensor relative measure would be noise for tensors whose true
 * gradient is zero, such as an attention key bias). TOL = 0 demands bit-identical tensors. Exits 1 on a
 * difference, 2 on a structural mismatch. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    hid_t other;
    double tol, element_tol;
    double diff2, norm2, max_diff, max_abs; /* over all tensors */
    int n, failed, structural, all_bitwise;
} cmp_ctx;

static float *read_all(hid_t file, const char *name, hsize_t *n) {
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    if (ds < 0) return NULL;
    hid_t sp = H5Dget_space(ds);
    *n = (hsize_t)H5Sget_simple_extent_npoints(sp);
    float *buf = malloc((*n ? *n : 1) * sizeof(float));
    if (!buf || H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        buf = NULL;
    }
    H5Sclose(sp);
    H5Dclose(ds);
    return buf;
}

static herr_t visit(hid_t group, const char *name, const H5L_info_t *info, void *data) {
    (void)info;
    cmp_ctx *c = data;
    char path[512];
    snprintf(path, sizeof path, "/model/%s", name);
    hsize_t na = 0, nb = 0;
    float *a = read_all(group, name, &na);
    float *b = read_all(c->other, path, &nb);
    if (!a || !b || na != nb) {
        printf("%-28s missing or different size\n", name);
        c->structural = 1;
    } else {
        double num = 0, den = 0, maxabs = 0;
        int bitwise = memcmp(a, b, na * sizeof(float)) == 0;
        for (hsize_t i = 0; i < na; i++) {
            double d = (double)a[i] - (double)b[i];
            num += d * d;
            den += (double)a[i] * a[i];
            if (fabs(d) > maxabs) maxabs = fabs(d);
            if (fabs((double)a[i]) > c->max_abs) c->max_abs = fabs((double)a[i]);
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        printf("%-28s rel %.3e  max|diff| %.3e%s\n", name, rel, maxabs, bitwise ? "  (bit-identical)" : "");
        c->diff2 += num;
        c->norm2 += den;
        if (maxabs > c->max_diff) c->max_diff = maxabs;
        if (!bitwise) c->all_bitwise = 0;
    }
    c->n++;
    free(a);
    free(b);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: h5compare A.h5 B.h5 TOL [ELEMENT_TOL]\n");
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fa = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t fb = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fa < 0 || fb < 0) {
        fprintf(stderr, "h5compare: cannot open %s\n", fa < 0 ? argv[1] : argv[2]);
        return 2;
    }
    cmp_ctx c = {.other = fb, .tol = atof(argv[3]), .all_bitwise = 1};
    c.element_tol = argc == 5 ? atof(argv[4]) : c.tol;
    hid_t ga = H5Gopen2(fa, "/model", H5P_DEFAULT);
    if (ga < 0) {
        fprintf(stderr, "h5compare: %s has no /model group\n", argv[1]);
        return 2;
    }
    H5Literate(ga, H5_INDEX_NAME, H5_ITER_INC, NULL, visit, &c);
    H5Gclose(ga);
    H5Fclose(fa);
    H5Fclose(fb);
    double rel = c.norm2 > 0 ? sqrt(c.diff2 / c.norm2) : sqrt(c.diff2);
    double elem = c.max_abs > 0 ? c.max_diff / c.max_abs : c.max_diff;
    printf("%d tensors: relative difference %.3e of the whole model, largest element difference %.3e of the "
           "largest parameter%s (tolerance %g, elements %g)\n",
           c.n, rel, elem, c.all_bitwise ? ", bit-identical" : "", c.tol, c.element_tol);
    if (c.structural || c.n == 0) return 2;
    c.failed = c.tol == 0 ? !c.all_bitwise : (rel > c.tol || elem > c.element_tol);
    return c.failed ? 1 : 0;
}
