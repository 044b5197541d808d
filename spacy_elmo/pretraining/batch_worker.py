"""Training steps' host work off the loop: a worker process prepares each batch while the loop trains.

Where processes can be forked (Linux), one worker per training process runs `ahead` batches ahead; elsewhere the loop
prepares each batch itself. The batches are the same either way, and a checkpoint puts the prepared, untrained ones
back in front of the stream's pending batches.
"""
import contextlib
import copyreg
import gc
import io
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import time
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

import torch

from ..errors import TrainingError
from ..models.pytorch.char_ids import TokenIds
from .batch_stream import BatchStream
from .corpus import Sentence
from .trainer import HostStep, prepare_step
from .vocab import Vocabulary

#: Seconds between the worker's checks that the training process is still there (and the loop's that the worker is).
POLL_SECONDS = 1.0


def forks() -> bool:
    """Whether batches are prepared in a forked worker process here (see the module)."""
    return sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods()


class PreparedBatches:
    """The host's part of each training step (:func:`prepare_step`), ahead of the loop.

    The worker owns `stream` once it starts. `ahead`: batches prepared before the loop asks (a GPU-sized batch of 65,536
    tokens takes about 5 MB); `worker`: prepare in a worker process (default: where :func:`forks`).
    """

    def __init__(
        self, stream: BatchStream, token_ids: TokenIds, vocab: Vocabulary, *, ahead: int = 8,
        worker: Optional[bool] = None,
    ) -> None:
        self.stream = stream
        self.token_ids = token_ids
        self.vocab = vocab
        self.ahead = ahead
        self.worker = forks() if worker is None else worker
        self._process: Optional[Any] = None
        self._requests: Any = None
        self._results: Any = None
        self._ready: Deque[HostStep] = deque()  # received from the worker, not yet taken
        self._taken = 0  # batches the loop took since the worker started
        self._stopped = False  # a worker stopped: the stream here is behind until a state is loaded

    def next_step(self) -> HostStep:
        """The next batch, prepared (without the negatives of a sampled softmax)."""
        self._check_not_stopped()
        if not self.worker:
            return prepare_step(self.stream.next_batch(), self.token_ids, self.vocab)
        if self._process is None:
            self._start()
        while not self._ready:
            self._ready.append(pickle.loads(self._receive("batch")))
        self._taken += 1
        self._requests.put(("batch", None))
        return self._ready.popleft()

    def state_dict(self) -> Dict[str, Any]:
        """The stream's state as the loop sees it (:meth:`BatchStream.state_dict`)."""
        self._check_not_stopped()
        if self._process is None:
            return self.stream.state_dict()
        self._requests.put(("state", self._taken))
        while True:
            kind, value = self._next_message()
            if kind == "state":
                return value
            self._ready.append(pickle.loads(value))

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from `state`: before the first batch (a resumed run), as the stream itself does."""
        self.close()
        self.stream.load_state_dict(state)
        self._stopped = False

    def close(self) -> None:
        """Stop the worker once the batch it prepares is done (it may be writing tokenized
        files). The stream it drew from goes with it: only a loaded state continues it."""
        process, self._process = self._process, None
        if process is None:
            return
        self._stopped = True
        self._requests.put(("stop", None))
        deadline = time.monotonic() + 60
        while process.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):  # a worker exits once the batches it sent are read
                self._results.get(timeout=0.1)
        if process.is_alive():
            process.terminate()
        process.join()
        self._ready.clear()
        self._taken = 0

    def _check_not_stopped(self) -> None:
        if self._stopped:
            raise RuntimeError("the batch worker was closed: load a state (load_state_dict) to continue")

    def _start(self) -> None:
        context = multiprocessing.get_context("fork")
        self._requests, self._results = context.Queue(), context.Queue()
        self._process = context.Process(
            target=_serve, args=(self.stream, self.token_ids, self.vocab, self.ahead, self._requests, self._results),
            name="spacy-elmo-batches", daemon=True,
        )
        self._process.start()
        for _ in range(self.ahead):
            self._requests.put(("batch", None))

    def _receive(self, expected: str) -> Any:
        kind, value = self._next_message()
        if kind != expected:
            raise TrainingError(f"the batch worker answered {kind!r} where {expected!r} was due")
        return value

    def _next_message(self) -> Tuple[str, Any]:
        while True:
            try:
                kind, value = self._results.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if not self._process.is_alive():
                    code = self._process.exitcode
                    self._process, self._stopped = None, True
                    raise TrainingError(
                        f"The process preparing the training batches stopped (exit code {code}); "
                        "--resume continues from the last checkpoint"
                    ) from None
                continue
            if kind == "error":
                raise value
            return kind, value


def _serve(
    stream: BatchStream, token_ids: TokenIds, vocab: Vocabulary, ahead: int, requests: Any, results: Any
) -> None:
    """The worker: answers each request of the loop in order (a batch, the stream's state, stop)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the loop, which stops the worker
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    torch.set_num_threads(1)
    collect_rarely()
    parent = os.getppid()
    sent: Deque[List[Sentence]] = deque(maxlen=ahead + 1)  # the sentences of the last batches sent
    produced = 0
    while True:
        try:
            kind, value = requests.get(timeout=POLL_SECONDS)
        except queue.Empty:
            if os.getppid() != parent:
                return  # the training process is gone
            continue
        if kind == "stop":
            return
        try:
            if kind == "batch":
                sentences = stream.next_batch()
                results.put(("batch", _as_bytes(prepare_step(sentences, token_ids, vocab))))
                sent.append(sentences)
                produced += 1
            else:  # "state": `value` batches taken; those sent after them go back in front
                untaken = list(sent)[len(sent) - (produced - value):] if produced > value else []
                state = stream.state_dict()
                state["pending"] = state["pending"] + [[list(s) for s in batch] for batch in reversed(untaken)]
                results.put(("state", state))
        except Exception as err:  # the loop raises it: a corpus error is the user's one-line message
            results.put(("error", err if _picklable(err) else TrainingError(f"{type(err).__name__}: {err}")))
            return


def collect_rarely() -> None:
    """Python's cycle collector every 50,000 allocations, not 700: drawing a batch makes thousands of lists (one per
    sentence), and at the default a third of the worker's time went to walking the shuffle buffer's (measured with
    benchmarks/bench_batches.py). The lists hold strings only, so no cycle waits longer for it."""
    gc.set_threshold(50_000, 20, 100)


def _as_bytes(step: HostStep) -> bytes:
    """`step` pickled with its tensors as NumPy arrays (a copy of their memory). Tensors
    pickled as torch pickles them go through torch.save, several times slower; put on
    the queue as they are, they would be shared through descriptors the worker must outlive."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    pickler.dispatch_table = {**copyreg.dispatch_table, torch.Tensor: _tensor_from_array}
    pickler.dump(step)
    return buffer.getvalue()


def _tensor_from_array(tensor: torch.Tensor) -> Tuple[Any, Tuple[Any, ...]]:
    return torch.from_numpy, (tensor.numpy(),)


def _picklable(err: BaseException) -> bool:
    try:
        pickle.dumps(err)
        return True
    except Exception:
        return False
