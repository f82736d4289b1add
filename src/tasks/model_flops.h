/* Model FLOPs of one training sample (forward + backward), for the TFLOP/s and MFU figures of the log
 * (docs/performance.md, "Model FLOP/s and MFU"). Only matrix products and convolutions are counted, a
 * multiply-add as 2 FLOPs, each as the dense product the model defines (not what an implementation
 * saves: Winograd convolutions still count as direct ones). Training costs 3 × the forward product
 * (the forward, the data gradient, the weight gradient) except where the data gradient is not needed
 * (a layer that reads the input images). */
#ifndef HS_TASKS_MODEL_FLOPS_H
#define HS_TASKS_MODEL_FLOPS_H

/* BERT pre-training on sequences of T tokens with P labelled positions (hetseq runs the MLM head on the
 * labelled positions only), L layers, hidden H, intermediate I, padded vocabulary V:
 *   6·T·L·(4H² + 2HI)   encoder: Q, K, V and the output projection; the FFN's two products
 *   12·L·T²·H           attention: Q·Kᵀ and P·V (2·T²·H each, forward, over all heads)
 *   6·P·(H² + V·H)      MLM head: transform and tied decoder on the labelled rows
 *   6·(H² + 2H)         NSP: pooler and classifier on the first token
 * Per token the first two are docs/gpu.md's 6·N + 12·L·H·T with N = L·(4H² + 2HI), the encoder's matmul
 * parameters (embedding lookups cost no FLOPs). */
double hs_bert_train_flops_per_sequence(int layers, int hidden, int intermediate, int padded_vocab, int seq_len,
                                        int predictions);

/* HetSeq's MNIST CNN (src/models/cnn.h), per 28×28 image:
 *   conv1 1→32 3×3 on 26×26 outputs: 2·26²·32·9, ×2 (no data gradient for the input images)
 *   conv2 32→64 3×3 on 24×24 outputs: 2·24²·64·288, ×3
 *   fc1 9216→128: 2·9216·128, ×3;  fc2 128→10: 2·128·10, ×3 */
double hs_cnn_train_flops_per_image(void);

/* Transformer-XL (attn_type 0) per predicted token, L layers of n heads of d columns, width D, feed-forward
 * width I, segments of q tokens attending to k = q + m keys (m memory steps). Per layer, forward:
 *   2·(k/q)·D·3nd   qkv_net on the memory rows and the segment (k rows per q predicted tokens)
 *   6·k·nd          scores (q_i + r_w_bias)·k_j, (q_i + r_r_bias)·r_t, and P·V
 *   2·nd·D + 4·D·I  o_net; the position-wise feed-forward layer
 * trained 3 × (forward, data gradient, weight gradient), except qkv_net on the memory rows, 2 × (the
 * memories are detached: no data gradient). r_net (k rows once per segment, shared by every column of the
 * batch: 1/batch of qkv_net's cost) is left out. Softmax: 6·D·e (the projection to the embedding width
 * e when e != D) + 6·e·h with h head columns (the c_0 shortlist words + one per tail cluster, or the whole
 * vocabulary without the adaptive softmax); tail clusters are scored only for the tokens whose target
 * lies in them, a data-dependent share, so they are not counted (MFU is then a lower bound). The
 * adaptive input's gathers cost no FLOPs; its projections (only where a cluster's width differs from D)
 * are left out like the tails. */
double hs_txl_train_flops_per_token(int layers, int heads, int head_dim, int d_model, int d_inner, int tgt_len,
                                    int mem_len, int d_embed, int head_cols);

#endif
