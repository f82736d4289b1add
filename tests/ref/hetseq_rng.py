"""hetseq's counter RNG (kernels/math/hs_math.h, kernels/math/dropout.h) in Python, for the reference tests
that redraw hetseq's dropout masks: splitmix64's finalizer, the per-site key, the hidden-layer dropout's
draws (hs_dropout_sample_key, hs_dropout_uniform) and the attention dropout's (hs_attention_sample_key,
hs_attention_uniform)."""
import numpy as np

M64 = (1 << 64) - 1
PHI = 0x9E3779B97F4A7C15


def mix64_int(z):
    """splitmix64's finalizer on a Python int (wrapping at 64 bits)."""
    z = (z + PHI) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def mix64_np(z):
    """The same on a numpy uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(PHI)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def rng_key(seed, update, site):
    """The dropout key of a site in an update."""
    return mix64_int(mix64_int(mix64_int(seed) ^ update) ^ ((site * 0xD1342543DE82EF95) & M64))


def uniform(key, sample, elems):
    """The hidden-layer dropout's uniforms (hs_dropout_uniform of hs_dropout_sample_key) for a numpy array of
    element (or group) indices elems (any shape), float32 in [0, 1): with sk = mix64(key ^ mix64(sample·φ)),
    the top 24 bits of lowbias32(lowbias32(lo(e) ^ hi(sk)) ^ (lo(sk) + hi(e)·0x9E3779B9)) / 2^24. sample may
    be an int or a broadcastable uint64 array."""
    with np.errstate(over="ignore"):
        sk = mix64_np(np.uint64(key) ^ mix64_np(np.asarray(sample, dtype=np.uint64) * np.uint64(PHI)))
        e = np.asarray(elems, dtype=np.uint64)
        sk_hi = (sk >> np.uint64(32)).astype(np.uint32)
        sk_lo = (sk & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        e_lo = (e & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        e_hi = (e >> np.uint64(32)).astype(np.uint32)
        x = lowbias32_np(lowbias32_np(e_lo ^ sk_hi) ^ (sk_lo + e_hi * np.uint32(0x9E3779B9)))
    return (x >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def lowbias32_np(x):
    """hs_lowbias32 on a numpy uint32 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint32(16))
        x = x * np.uint32(0x7FEB352D)
        x = x ^ (x >> np.uint32(15))
        x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def attention_sample_key(key, sample):
    """hs_attention_sample_key: mix64(key ^ mix64(sample·φ)), one per (site, sample)."""
    return mix64_int(key ^ mix64_int((sample * PHI) & M64))


def attention_uniform(key, sample, heads, qlen, klen):
    """The attention dropout's uniforms of sample `sample` (an int), float32 [heads, qlen, klen] in [0, 1):
    element (h, i, j) is hs_attention_uniform(sk, row_key, j) with sk = hs_attention_sample_key(key, sample),
    row_key = lowbias32((h·qlen + i) ^ hi(sk)): with x = lowbias32(lowbias32((j >> 1) ^ row_key) ^
    (row_key + lo(sk))), one per column pair, x's low 16 bits for an even j, its high 16 for an odd j, / 2^16."""
    sk = attention_sample_key(key, sample)
    rows = np.arange(heads * qlen, dtype=np.uint32).reshape(heads, qlen, 1)
    cols = np.arange(klen, dtype=np.uint32).reshape(1, 1, klen)
    with np.errstate(over="ignore"):
        row_key = lowbias32_np(rows ^ np.uint32(sk >> 32))
        x = lowbias32_np(lowbias32_np((cols >> np.uint32(1)) ^ row_key) ^ (row_key + np.uint32(sk & 0xFFFFFFFF)))
    b16 = np.where((cols & np.uint32(1)) != 0, x >> np.uint32(16), x & np.uint32(0xFFFF))
    return b16.astype(np.float32) * np.float32(1.0 / 65536.0)
