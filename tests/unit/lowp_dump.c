/* The conversions of src/util/lowp.h as a filter, for tests/ref/test_lowp_round.py (which compares them
 * with torch's and numpy's). Usage:
 *   lowp_dump f  < fp32 patterns (uint32, native order) > per input: fp16 bits (uint16), bf16 bits
 *                  (uint16), tf32-rounded fp32 bits (uint32)
 *   lowp_dump h  < fp16 patterns (uint16) > per input: hs_fp16_to_float's fp32 bits (uint32) */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/lowp.h"

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "f") != 0 && strcmp(argv[1], "h") != 0)) {
        fprintf(stderr, "usage: lowp_dump f|h < input > output\n");
        return 2;
    }
    if (argv[1][0] == 'f') {
        uint32_t u;
        while (fread(&u, sizeof u, 1, stdin) == 1) {
            const float x = hs_lowp_u2f(u);
            const uint16_t h = hs_fp16_bits(x), b = hs_bf16_bits(x);
            const uint32_t t = hs_lowp_f2u(hs_tf32_round(x));
            if (fwrite(&h, sizeof h, 1, stdout) != 1 || fwrite(&b, sizeof b, 1, stdout) != 1 ||
                fwrite(&t, sizeof t, 1, stdout) != 1)
                return 1;
        }
    } else {
        uint16_t h;
        while (fread(&h, sizeof h, 1, stdin) == 1) {
            const uint32_t t = hs_lowp_f2u(hs_fp16_to_float(h));
            if (fwrite(&t, sizeof t, 1, stdout) != 1) return 1;
        }
    }
    return ferror(stdin) || fflush(stdout) != 0;
}
