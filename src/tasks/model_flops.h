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

#endif
