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

double hs_txl_train_flops_per_token(int layers, int heads, int head_dim, int d_model, int d_inner, int tgt_len,
                                    int mem_len, int d_embed, int head_cols) {
    const double L = layers, nd = (double)heads * head_dim, D = d_model, I = d_inner, q = tgt_len, m = mem_len;
    const double k = q + m, e = d_embed, h = head_cols;
    const double qkv_segment = 3.0 * (2.0 * D * 3.0 * nd);           /* the q rows, trained 3 × */
    const double qkv_memory = 2.0 * (m / q) * (2.0 * D * 3.0 * nd);  /* the m rows, trained 2 × */
    const double attention = 3.0 * 6.0 * k * nd;
    const double projection_ffn = 3.0 * (2.0 * nd * D + 4.0 * D * I);
    const double softmax = (e != D ? 6.0 * D * e : 0.0) + 6.0 * e * h;
    return L * (qkv_segment + qkv_memory + attention + projection_ffn) + softmax;
}
