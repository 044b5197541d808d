"""The default pretraining config: every setting, with a comment on each (what
`init-config` writes, and the values a config file leaves out)."""
from ..models.pytorch.options import NAMED_SIZES
from ..errors import ConfigError

DEFAULT_CONFIG = """\
# spacy-elmo biLM pretraining. Run: python -m spacy_elmo pretrain CONFIG OUTPUT_DIR
# Any setting can be overridden on the command line, e.g. --paths.train corpus.txt
# --training.max_steps 1000. Multi-GPU: torchrun --nproc_per_node=K -m spacy_elmo pretrain ...

[paths]
# Training text: a file, a directory (all its non-hidden files) or a glob pattern.
# Plain text (one sentence or paragraph per line), JSONL or spaCy .spacy files.
train = null
# Held-out text for perplexity (same formats); null = no evaluation.
dev = null

[system]
# Seeds initialisation, shuffling, dropout and negative sampling (0 to 4,294,967,295).
seed = 0

[corpus]
train = ${paths.train}
dev = ${paths.dev}
# "auto" (.jsonl -> jsonl, .spacy -> spacy, anything else -> text), "text", "jsonl" or "spacy".
format = "auto"
# The JSONL field that holds the text.
text_field = "text"
# A spaCy language code ("en", "de", ...) whose tokenizer splits the text, or "whitespace"
# for text that is already tokenized. .spacy files are already tokenized. Tokens are cut
# to their first 48 characters (the biLM reads a token's first 48 UTF-8 bytes).
tokenizer = "__LANG__"
# Split each line (e.g. a paragraph) into sentences with spaCy's rule-based sentencizer.
split_sentences = false
# Training is per sentence from a zero LSTM state; longer lines are cut into windows
# of at most this many tokens.
max_window = 100
# Sentences held in memory (and in each checkpoint) for shuffling, at most 1,048,576;
# the corpus itself is streamed.
shuffle_buffer = 20000
# Evaluate on at most this many held-out sentences (null = all).
max_dev_sentences = null

[vocab]
# The softmax vocabulary: the K most frequent training words, plus <S>, </S>, <UNK>.
size = 100000
min_count = 1
# Use this vocab.txt (frequency-sorted, <S> </S> <UNK> first) instead of building one.
path = null

[model]
# A named size ("tiny", "compact", "small", "medium", "original"); every setting below that is
# not null replaces the named size's value. With --init-from the sizes come from that biLM.
size = "__SIZE__"
lstm_dim = null
projection_dim = null
n_layers = null
n_highway = null
char_embedding_dim = null
# Character filters as [[width, count], ...].
filters = null
cell_clip = null
proj_clip = null
use_skip_connections = null

[softmax]
# "full", "sampled", or "auto": sampled when the vocabulary is larger than max_full_vocab.
# Held-out perplexity always uses the full softmax.
kind = "auto"
max_full_vocab = 32768
# Negative classes per batch, drawn log-uniformly from the frequency-sorted vocabulary
# (bilm-tf: 8192).
n_negative_samples = 8192

[optimizer]
# "adagrad" (the paper: learn_rate 0.2, initial_accumulator 1.0) or "adam" (e.g. 0.001).
# Every number must be finite; learn_rate at most 1e6.
name = "adagrad"
learn_rate = 0.2
initial_accumulator = 1.0
beta1 = 0.9
beta2 = 0.999
eps = 1e-8
weight_decay = 0.0
# Schedule: the learning rate rises linearly over the first warmup_steps steps, stays,
# and over the last anneal_steps steps of training.max_steps falls linearly to
# anneal_to * learn_rate (0 steps: no warm-up / no anneal).
warmup_steps = 0
anneal_steps = 0
anneal_to = 0.1

[training]
# Tokens per optimizer step, summed over all processes; a token is a word, and each
# sentence adds one end-of-sentence token. At most 1,048,576, and sort_window x
# tokens_per_step at most 8,388,608 (drawn at once, held in memory and in checkpoints).
tokens_per_step = 4096
# Stop after max_steps steps; if null, after max_epochs passes over the training text.
max_steps = null
max_epochs = 10
# Batches' worth of sentences sorted by length together (fewer LSTM steps); 1 = off.
sort_window = 32
# Dropout on the LSTM inputs and on the top layer before the softmax (bilm-tf: 0.1).
dropout = 0.1
# The mean loss per token is multiplied by this before backpropagation. bilm-tf uses its
# unroll length, 20; with Adagrad (initial accumulator 1.0) it sets the early step size.
gradient_scale = 20.0
# Clip the (scaled) gradient norm to this value (bilm-tf: 10); 0 = no clipping.
grad_clip = 10.0
# "auto" = bfloat16 autocast on GPU and float32 on CPU; or "bf16" / "fp32".
precision = "auto"
# Log every this many steps: the steps' losses, gradient norms and skipped steps are read
# from the device then (and at checkpoints), never in between.
log_every = 10
eval_every = 1000
# Also evaluate before the first step (the perplexity a model starts from).
eval_at_start = true
# Checkpoint (and export the model) every this many steps, and at the end.
checkpoint_every = 1000
# Skip steps whose loss is not finite; stop with an error after this many in a row.
max_nonfinite_steps = 5
# Held-out evaluation batch size, in tokens per process.
eval_tokens_per_batch = 8192
"""


def default_config_text(*, size: str = "small", lang: str = "en") -> str:
    """The commented default config (what `init-config` writes)."""
    if size not in NAMED_SIZES:
        raise ConfigError(f"unknown model size {size!r}; choose one of {', '.join(NAMED_SIZES)}")
    return DEFAULT_CONFIG.replace("__SIZE__", size).replace("__LANG__", lang)
