"""What hetseq's `precision` means in PyTorch, shared by the PyTorch side of the benchmarks
(bench/cnn_torch.py, bench/txl_torch.py, bench/gpu/bert_hf.py):
  fp32  strict fp32: torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 off;
  tf32  both on (fp32 data, TF32 tensor-core products);
  bf16, fp16  the forward pass and the loss under torch.autocast(device, dtype), TF32 off for what stays
        fp32; fp16 with dynamic loss scaling (the caller's).
On the CPU an autocast PyTorch refuses (fp16 before PyTorch 2.x) runs in fp32 with a note saying so."""
import contextlib
import resource

import torch


def setup(device, precision):
    """Sets the TF32 switches for `precision` on `device`; returns the autocast dtype or None."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)


def autocast(device, precision):
    """(a function returning the context manager for the forward pass, a note or None)."""
    dtype = setup(device, precision)
    if dtype is None:
        return contextlib.nullcontext, None
    try:
        with torch.autocast(device.type, dtype=dtype):
            on = torch.is_autocast_enabled() if device.type == "cuda" else torch.is_autocast_cpu_enabled()
    except RuntimeError as e:
        on, why = False, str(e).splitlines()[0]
    else:
        why = "autocast disabled itself"
    if not on:
        return contextlib.nullcontext, "torch %s has no %s autocast on %s (%s): ran in fp32" % (
            torch.__version__, precision, device.type, why)
    return (lambda: torch.autocast(device.type, dtype=dtype)), None


def compile_note():
    """None when torch.compile is there, else why not."""
    return None if hasattr(torch, "compile") else "torch.compile needs PyTorch >= 2 (this is %s)" % torch.__version__


def peak(device):
    """(peak bytes, what they are): the caching allocator's peak on a GPU, the process's peak RSS on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), "torch.cuda.max_memory_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "peak RSS"


def synchronizer(device):
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
