#!/usr/bin/env python3
"""A user who prepares BERT data with hetseq checks that its tokenizer gives exactly the token ids of
Hugging Face's BERT tokenizer on the same vocabulary: every line of every file of the fortunes corpus
(/usr/share/games/fortunes, the demo's text) and the hand-written hard cases of
tests/fixtures/tokenizer_cases.txt (accents, CJK, emoji, control characters, long words, Turkish I,
sharp s, full-width forms, combining marks, zero-width characters, no-break spaces...).

Vocabularies are learned by Hugging Face's WordPiece trainer on that text: a large one (8000 entries,
few [UNK]) and a small one (a 60-character alphabet: many ## pieces and [UNK] words), lower-cased and
cased. The reference is the `tokenizers` pipeline of BertWordPieceTokenizer / BertTokenizerFast
(BertNormalizer clean_text, handle_chinese_chars, strip_accents=None, lowercase; BertPreTokenizer;
WordPiece with [UNK] and 100 characters per word), without matching special tokens in the text (BERT's
never_split empty). Every line must match. The test also runs transformers' slow BertTokenizer and
reports where it differs, which must only be lines where Hugging Face's two tokenizers disagree with
each other (docs/tokenization.md explains those). It prints the number of lines compared, the
mismatches and the tokenizer's speed in MB/s on the fortunes corpus.

Fails naming what to install when the `tokenizers` package (PyPI, in the venv tools/quickstart.sh test
makes) or the fortunes corpus (Debian's fortunes) is missing."""
import functools
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # a fair speed comparison on one core
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
try:
    import tokenizers
    from tokenizers import BertWordPieceTokenizer, Tokenizer, models, normalizers, pre_tokenizers
except ImportError as e:
    print("FAIL: Hugging Face's tokenizers is not importable (%s). tools/quickstart.sh test installs it in "
          "build/pyenv; by hand: python3 -m venv --system-site-packages build/pyenv && build/pyenv/bin/pip "
          "install tokenizers==0.15.2 transformers==4.38.2, then configure with PYTHON_TORCH=build/pyenv/bin/python"
          % e, file=sys.stderr)
    sys.exit(1)
try:
    import transformers
    from transformers import BertTokenizer
    transformers.logging.set_verbosity_error()
except ImportError as e:
    print("FAIL: Hugging Face's transformers is not importable (%s). tools/quickstart.sh test installs it in "
          "build/pyenv; by hand: build/pyenv/bin/pip install transformers==4.38.2, then configure with "
          "PYTHON_TORCH=build/pyenv/bin/python" % e, file=sys.stderr)
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("top_srcdir", os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("top_builddir", ".")
DRIVER = os.path.join(BUILD, "tests", "ref", "tokenize_driver")
FORTUNES = os.environ.get("FORTUNES_DIR", "/usr/share/games/fortunes")
CASES = os.path.join(SRCDIR, "tests", "fixtures", "tokenizer_cases.txt")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

failures = []


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_lines(path):
    """Lines as the driver sees them: split on "\\n" only (a "\\r" stays in its line)."""
    data = open(path, "rb").read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [l.decode("utf-8") for l in lines]


def corpus_files():
    if not os.path.isdir(FORTUNES):
        print("FAIL: no fortunes corpus in %s: install Debian's fortunes" % FORTUNES, file=sys.stderr)
        sys.exit(1)
    files = []
    for name in sorted(os.listdir(FORTUNES)):
        path = os.path.join(FORTUNES, name)
        # *.dat are strfile's binary indexes; *.u8 are symbolic links to the text files
        if name.endswith(".dat") or os.path.islink(path) or not os.path.isfile(path):
            continue
        files.append(path)
    if not files:
        fail("no text files in %s" % FORTUNES)
    return files


def learn_vocab(text_file, out_dir, lower, size, alphabet):
    trainer = BertWordPieceTokenizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lower)
    trainer.train([text_file], vocab_size=size, min_frequency=2, limit_alphabet=alphabet, special_tokens=SPECIAL,
                  show_progress=False, wordpieces_prefix="##")
    os.makedirs(out_dir, exist_ok=True)
    return trainer.save_model(out_dir)[0]


def hf_fast(vocab_file, lower):
    """BertWordPieceTokenizer's pipeline without its added special tokens (never_split empty)."""
    vocab = models.WordPiece.read_file(vocab_file)
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=lower)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def hf_slow(vocab_file, lower):
    tok = BertTokenizer(vocab_file, do_lower_case=lower, tokenize_chinese_chars=True, strip_accents=None)
    # transformers 4.38 does not hand split_special_tokens on to _tokenize: bind it, so "[MASK]" in the
    # text is text, as in the other two tokenizers
    tok._tokenize = functools.partial(type(tok)._tokenize, tok, split_special_tokens=True)
    return tok, lambda line: tok.tokenize(line, split_special_tokens=True)


def run_driver(vocab_file, text_file, lower, extra=()):
    cmd = [DRIVER, vocab_file, text_file] + ([] if lower else ["--cased"]) + list(extra)
    r = subprocess.run(cmd, capture_output=True, timeout=600)
    if r.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr.decode(errors="replace")))
    out = r.stdout.decode("utf-8").split("\n")
    if out and out[-1] == "":
        out.pop()
    return out, r.stderr.decode()


def parse_ids(lines):
    return [[int(x) for x in l.split()] for l in lines]


def explain(line, vocab_file, lower, fast, got):
    """What a user needs to see for one mismatch: the words on each side and the pieces."""
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.write(line + "\n")
    words, _ = run_driver(vocab_file, f.name, lower, ["--words"])
    os.unlink(f.name)
    ref_words = [w for w, _ in fast.pre_tokenizer.pre_tokenize_str(fast.normalizer.normalize_str(line))]
    enc = fast.encode(line, add_special_tokens=False)
    return ("  line %r\n  hetseq words   %r\n  reference words %r\n  hetseq ids     %r\n  reference ids  %r (%r)"
            % (line, words[0].split("\x01") if words and words[0] else [], ref_words, got, enc.ids, enc.tokens))


def compare(name, lines, text_file, vocab_file, lower, slow_too):
    fast = hf_fast(vocab_file, lower)
    ref = [e.ids for e in fast.encode_batch(lines, add_special_tokens=False)]
    out, _ = run_driver(vocab_file, text_file, lower)
    if len(out) != len(lines):
        fail("%s: the driver printed %d lines for %d input lines" % (name, len(out), len(lines)))
    got = parse_ids(out)
    bad = [i for i in range(len(lines)) if got[i] != ref[i]]
    tokens = sum(len(r) for r in ref)
    unk = fast.token_to_id("[UNK]")
    n_unk = sum(r.count(unk) for r in ref)
    n_cont = sum(1 for r in ref for t in r if fast.id_to_token(t).startswith("##"))
    print("%s: %d lines, %d tokens (%d [UNK], %d ## pieces): %d mismatches vs tokenizers %s"
          % (name, len(lines), tokens, n_unk, n_cont, len(bad), tokenizers.__version__))
    for i in bad[:5]:
        print(explain(lines[i], vocab_file, lower, fast, got[i]))
    if bad:
        failures.append("%s: %d of %d lines differ from Hugging Face's tokenizers (first: line %d)"
                        % (name, len(bad), len(lines), bad[0] + 1))
    if slow_too:
        slow, slow_tokens = hf_slow(vocab_file, lower)
        ref_slow = [slow.convert_tokens_to_ids(slow_tokens(l)) for l in lines]
        refs_differ = [i for i in range(len(lines)) if ref_slow[i] != ref[i]]
        bad_slow = [i for i in range(len(lines)) if got[i] != ref_slow[i]]
        unexplained = [i for i in bad_slow if i not in set(refs_differ)]
        print("%s: %d mismatches vs transformers %s BertTokenizer (which differs from tokenizers on %d lines)"
              % (name, len(bad_slow), transformers.__version__, len(refs_differ)))
        for i in refs_differ[:3]:
            print("  the two Hugging Face tokenizers differ on %r:\n    tokenizers    %r\n    BertTokenizer %r"
                  % (lines[i], fast.encode(lines[i], add_special_tokens=False).tokens,
                     slow_tokens(lines[i])))
        if unexplained:
            failures.append("%s: %d lines differ from BertTokenizer where both Hugging Face tokenizers agree "
                            "(first: %r)" % (name, len(unexplained), lines[unexplained[0]]))
    return got, ref


def main():
    if not os.access(DRIVER, os.X_OK):
        fail("missing %s (make check builds it)" % DRIVER)
    scratch = tempfile.TemporaryDirectory(prefix="hetseq-tokenizer.")
    work = scratch.name
    fortune_lines = []
    for path in corpus_files():
        fortune_lines += read_lines(path)
    case_lines = read_lines(CASES)
    fortunes_txt = os.path.join(work, "fortunes.txt")
    cases_txt = os.path.join(work, "cases.txt")
    all_txt = os.path.join(work, "all.txt")
    for path, lines in ((fortunes_txt, fortune_lines), (cases_txt, case_lines),
                        (all_txt, fortune_lines + case_lines)):
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write("".join(l + "\n" for l in lines))

    for lower in (True, False):
        mode = "lower-cased" if lower else "cased"
        big = learn_vocab(all_txt, os.path.join(work, mode + "-8000"), lower, 8000, 1000)
        small = learn_vocab(all_txt, os.path.join(work, mode + "-small"), lower, 400, 60)
        got, _ = compare("fortunes, %s, vocab 8000" % mode, fortune_lines, fortunes_txt, big, lower, True)
        compare("hard cases, %s, vocab 8000" % mode, case_lines, cases_txt, big, lower, True)
        compare("fortunes, %s, small vocab" % mode, fortune_lines, fortunes_txt, small, lower, False)
        compare("hard cases, %s, small vocab" % mode, case_lines, cases_txt, small, lower, False)
        if lower:
            lower_ids = got
            lower_vocab = big
        else:
            # the comparison can fail: cased ids on the lower-cased vocabulary differ on many lines
            control, _ = run_driver(lower_vocab, fortunes_txt, False)
            differ = sum(1 for a, b in zip(parse_ids(control), lower_ids) if a != b)
            print("control: cased tokenization against the lower-cased reference differs on %d lines" % differ)
            if differ < 1000:
                failures.append("control: the cased tokenizer should differ from the lower-cased one on many "
                                "fortune lines, differs on %d" % differ)

    # speed on the fortunes corpus (best of 3 passes, without printing)
    _, err = run_driver(lower_vocab, fortunes_txt, True, ["--repeat", "3"])
    print("hetseq: " + err.strip())
    fast = hf_fast(lower_vocab, True)
    t0 = time.perf_counter()
    fast.encode_batch(fortune_lines, add_special_tokens=False)
    t = time.perf_counter() - t0
    print("tokenizers %s (1 thread): %.1f MB/s" % (tokenizers.__version__, os.path.getsize(fortunes_txt) / 1e6 / t))

    scratch.cleanup()
    if failures:
        for f in failures:
            print("FAIL: " + f, file=sys.stderr)
        sys.exit(1)
    print("PASS: hetseq's BERT tokenizer equals Hugging Face's on %d fortune lines and %d hard cases, "
          "lower-cased and cased" % (len(fortune_lines), len(case_lines)))


main()
