"""A user learns a vocabulary from the fortunes corpus with `hetseq prep vocab` and with Hugging Face
tokenizers' BertWordPieceTokenizer (same size, min_frequency 2, limit_alphabet 1000, lower-case). The two
follow the same algorithm but break ties between equally frequent pairs by their own token ids, so the
vocabularies need not be equal: this checks that they share the special tokens at ids 0-4, the same
alphabet, most of the learnt tokens (> 80% of the first 2000), and that tokenizing the corpus with either
vocabulary takes about as many tokens per word (within 10%). Reports the overlap and both timings.
Fails naming what to install without the `tokenizers` package (PyPI, in the venv tools/quickstart.sh
test makes) or Debian's fortunes."""
import os
import subprocess
import sys
import tempfile
import time

try:
    from tokenizers import BertWordPieceTokenizer
except ImportError:
    print("FAIL: Hugging Face's tokenizers is not importable. tools/quickstart.sh test installs it in build/pyenv; "
          "by hand: python3 -m venv --system-site-packages build/pyenv && build/pyenv/bin/pip install "
          "tokenizers==0.15.2 transformers==4.38.2, then configure with PYTHON_TORCH=build/pyenv/bin/python",
          file=sys.stderr)
    sys.exit(1)

FORTUNES = os.environ.get("FORTUNES_DIR", "/usr/share/games/fortunes")
HETSEQ = os.environ.get("HETSEQ", "./hetseq")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def text_files(directory):
    """The corpus as hetseq reads a directory: regular files, each once (the *.u8 names are symlinks to
    the same files), without the binary *.dat indexes (NUL bytes) or non-UTF-8 files."""
    files, seen = [], set()
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        real = os.path.realpath(path)
        if name.startswith(".") or real in seen or not os.path.isfile(path):
            continue
        data = open(path, "rb").read()
        if b"\0" in data:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        seen.add(real)
        files.append(path)
    return files


def read_vocab(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def learnt(vocab):
    """The merged tokens: after the special tokens, the single characters and their ## forms."""
    base = [t for t in vocab if t in SPECIAL or len(t) == 1 or (t.startswith("##") and len(t) == 3)]
    return vocab[len(base):], set(base)


def tokens_per_word(vocab_path, lines):
    tok = BertWordPieceTokenizer(vocab_path, lowercase=True)
    tokens = words = unknown = 0
    for enc in tok.encode_batch(lines, add_special_tokens=False):
        tokens += len(enc.ids)
        word_ids = [w for w in enc.word_ids if w is not None]
        words += (max(word_ids) + 1) if word_ids else 0
        unknown += enc.ids.count(tok.token_to_id("[UNK]"))
    return tokens / max(words, 1), words, unknown


def main():
    if not os.path.isdir(FORTUNES):
        print(f"FAIL: no fortunes corpus at {FORTUNES}: install Debian's fortunes", file=sys.stderr)
        return 1
    files = text_files(FORTUNES)
    lines = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines.extend(f.read().split("\n"))
    print(f"corpus: {len(files)} text files of {FORTUNES}, {sum(map(len, lines)) / 1e6:.1f} MB")
    failures = []
    with tempfile.TemporaryDirectory() as work:
        for size in (8000, 30000):
            ours = os.path.join(work, f"hetseq-{size}.txt")
            t0 = time.time()
            run = subprocess.run([HETSEQ, "prep", "vocab", "--corpus", FORTUNES, "--size", str(size), "--out", ours],
                                 capture_output=True, text=True)
            t_ours = time.time() - t0
            if run.returncode != 0:
                print(run.stdout, run.stderr)
                return 1
            t0 = time.time()
            hf = BertWordPieceTokenizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
            hf.train(files, vocab_size=size, min_frequency=2, limit_alphabet=1000, special_tokens=SPECIAL,
                     show_progress=False, wordpieces_prefix="##")
            t_hf = time.time() - t0
            vocab = hf.get_vocab()
            theirs_list = sorted(vocab, key=vocab.get)
            theirs = os.path.join(work, f"hf-{size}.txt")
            with open(theirs, "w", encoding="utf-8") as f:
                f.write("".join(t + "\n" for t in theirs_list))
            ours_list = read_vocab(ours)

            our_learnt, our_base = learnt(ours_list)
            their_learnt, their_base = learnt(theirs_list)
            first = min(2000, len(our_learnt), len(their_learnt))
            overlap_first = len(set(our_learnt[:first]) & set(their_learnt[:first])) / first
            overlap_all = len(set(ours_list) & set(theirs_list)) / len(theirs_list)
            tpw_ours, words, unk_ours = tokens_per_word(ours, lines)
            tpw_hf, _, unk_hf = tokens_per_word(theirs, lines)
            print(f"--size {size}: hetseq {len(ours_list)} tokens in {t_ours:.2f} s, tokenizers {len(theirs_list)} in "
                  f"{t_hf:.2f} s; same base (specials + alphabet + ##): {our_base == their_base}; overlap of the "
                  f"first {first} learnt tokens {100 * overlap_first:.2f}%, of the whole vocabularies "
                  f"{100 * overlap_all:.2f}%; tokens per word over {words} words: hetseq {tpw_ours:.4f} "
                  f"({unk_ours} [UNK]), tokenizers {tpw_hf:.4f} ({unk_hf} [UNK])")

            if ours_list[:5] != SPECIAL:
                failures.append(f"size {size}: ids 0-4 are {ours_list[:5]}, expected {SPECIAL}")
            if len(set(ours_list)) != len(ours_list):
                failures.append(f"size {size}: a token appears twice")
            if our_base != their_base:
                failures.append(f"size {size}: alphabets differ: only hetseq {sorted(our_base - their_base)}, "
                                f"only tokenizers {sorted(their_base - our_base)}")
            # when the pairs run out (min_frequency) the sizes differ a little: a merge that re-makes an
            # existing token adds none, and which merges do depends on the tie order
            if abs(len(ours_list) / len(theirs_list) - 1) > 0.01 or (len(theirs_list) == size) != (len(ours_list) == size):
                failures.append(f"size {size}: {len(ours_list)} tokens, tokenizers learnt {len(theirs_list)}")
            if overlap_first <= 0.80:
                failures.append(f"size {size}: only {100 * overlap_first:.1f}% of the first {first} learnt tokens shared")
            if abs(tpw_ours / tpw_hf - 1) > 0.10:
                failures.append(f"size {size}: {tpw_ours:.3f} tokens per word vs {tpw_hf:.3f}")
            if "the" not in ours_list or "##ing" not in ours_list:
                failures.append(f"size {size}: no 'the' or '##ing' learnt from English text")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
