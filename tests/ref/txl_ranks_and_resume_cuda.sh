#!/bin/sh
# tests/ref/txl_ranks_and_resume.sh with the model on the CUDA backend (the emulated device): world-size
# invariance and exact mid-epoch resume with the memories hold for a device = "cuda" Transformer-XL too.
. "${top_srcdir:-.}/tests/lib.sh"
[ -x "${HETSEQ_EMU:-}" ] || skip "hetseq on the emulated CUDA device is not built"
# a node of 2 emulated GPUs, one per rank: NCCL (ranks sharing one GPU: tests/cuda/test_shared_gpu.sh)
HETSEQ=$HETSEQ_EMU HS_TEST_DEVICE=cuda HS_CUDA_EMU_SEED="${HS_CUDA_EMU_SEED:-3}" HS_CUDA_EMU_DEVICES=2 \
  sh "$top_srcdir/tests/ref/txl_ranks_and_resume.sh" > cuda.log 2>&1; rc=$?
cat cuda.log
[ $rc -eq 0 ] || fail "txl_ranks_and_resume on the CUDA backend (exit $rc)"
pass
