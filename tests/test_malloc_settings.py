import subprocess
import sys

import pytest

from spacy_elmo.malloc_settings import keep_freed_memory

# Allocates and frees a 64 MB tensor five times (a training step's large temporaries)
# and prints the page faults that cost.
FAULTS_SCRIPT = """
import resource, sys, torch
from spacy_elmo.malloc_settings import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):  # the heap settles
    block = torch.ones(16 * 2**20); del block
before = faults()
for _ in range(5):
    block = torch.ones(16 * 2**20); del block
print(faults() - before)
"""


def page_faults(mode: str) -> int:
    result = subprocess.run(
        [sys.executable, "-c", FAULTS_SCRIPT, mode], capture_output=True, text=True, check=True
    )
    return int(result.stdout.split()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_blocks_are_reused_without_page_faults():
    pages_per_block = 64 * 2**20 // 4096
    # glibc by default maps each 64 MB block anew: every page faults again.
    assert page_faults("default") > 4 * pages_per_block
    assert page_faults("keep") < pages_per_block


def test_returns_false_off_linux(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert keep_freed_memory() is False
