#include "tasks/model_flops.h"

double hs_bert_train_flops_per_sequence(int layers, int hidden, int intermediate, int padded_vocab, int seq_len,
                                        int predictions) {
    const double L = layers, H = hidden, I = intermediate, V = padded_vocab, T = seq_len, P = predictions;
    const double encoder = 6.0 * T * L * (4.0 * H * H + 2.0 * H * I);
    const double attention = 12.0 * L * T * T * H;
    const double mlm_head = 6.0 * P * (H * H + V * H);
    const double nsp = 6.0 * (H * H + 2.0 * H);
    return encoder + attention + mlm_head + nsp;
}

/* A convolution's forward product per image: 2 · outputs · c_out · (c_in · kh · kw). */
static double conv_flops(int out_hw, int c_in, int c_out, int k) {
    return 2.0 * (double)out_hw * out_hw * c_out * ((double)c_in * k * k);
}

double hs_cnn_train_flops_per_image(void) {
    const double conv1 = conv_flops(26, 1, 32, 3), conv2 = conv_flops(24, 32, 64, 3);
    const double fc1 = 2.0 * 9216 * 128, fc2 = 2.0 * 128 * 10;
    return 2.0 * conv1 + 3.0 * (conv2 + fc1 + fc2);
}
