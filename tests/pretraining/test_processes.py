"""Where a process trains: one process without a process group, and the environment torchrun describes."""
import pytest
import torch

from spacy_elmo.errors import TrainingError
from spacy_elmo.pretraining.processes import GROUP_VARIABLES, Processes, setup_processes

CPU = torch.device("cpu")


@pytest.fixture()
def environment(monkeypatch):
    """No process group in the environment; the test sets what it needs."""
    for name in ("WORLD_SIZE", "LOCAL_RANK", *GROUP_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_one_process_is_the_main_one_and_its_collectives_are_its_own_values():
    one = Processes(0, 1, CPU)
    assert not one.distributed and one.is_main
    tensor = torch.tensor([1.0, 2.0])
    assert one.sum(tensor) is tensor and tensor.tolist() == [1.0, 2.0]
    assert bool(one.all_true_on_device(torch.tensor(True))) and not one.all_true_on_device(torch.tensor(False))
    assert one.gather_to_main({"a": 1}) == [{"a": 1}]
    assert one.decide_on_main(3, lambda gathered: gathered * 2) == [3, 3]


def test_only_rank_0_is_main_and_more_than_one_process_is_distributed():
    assert Processes(1, 2, CPU).distributed and not Processes(1, 2, CPU).is_main


def test_decide_on_main_raises_the_training_error_of_the_decision():
    def decide(gathered):
        raise TrainingError(f"refused {gathered}")

    with pytest.raises(TrainingError, match=r"refused \[3\]"):
        Processes(0, 1, CPU).decide_on_main(3, decide)


@pytest.mark.parametrize("world_size", [None, "1"], ids=["unset", "1"])
def test_without_a_process_group_one_process_runs_on_the_cpu(environment, world_size):
    if world_size is not None:
        environment.setenv("WORLD_SIZE", world_size)
    assert setup_processes() == Processes(0, 1, CPU)


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1.5"])
def test_a_world_size_that_is_not_a_number_of_processes_is_refused(environment, value):
    environment.setenv("WORLD_SIZE", value)
    with pytest.raises(TrainingError, match=r"^WORLD_SIZE='.*' in the environment is not a number of processes or a "
                       r"rank; unset it, or start the run with torchrun, which sets it$"):
        setup_processes()


def test_a_long_world_size_is_cut_short_in_the_message(environment):
    environment.setenv("WORLD_SIZE", "9" * 5000)
    with pytest.raises(TrainingError, match=r"^WORLD_SIZE='9{19}\.\.\. \(5002 characters\) in the environment"):
        setup_processes()


def test_a_world_size_without_the_rest_of_torchrun_environment_names_what_is_missing(environment):
    environment.setenv("WORLD_SIZE", "4")
    environment.setenv("RANK", "1")
    with pytest.raises(TrainingError, match=r"^WORLD_SIZE=4 is set, but not MASTER_ADDR, MASTER_PORT: start a run of "
                       r"several processes with torchrun \(torchrun --nproc_per_node=4 -m spacy_elmo pretrain "
                       r"\.\.\.\), or unset WORLD_SIZE for one process$"):
        setup_processes()


def test_a_negative_rank_is_refused_before_joining_a_group(environment):
    for name, value in {"WORLD_SIZE": "2", "RANK": "-1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        environment.setenv(name, value)
    with pytest.raises(TrainingError, match=r"^RANK='-1' in the environment is not a number of processes or a rank"):
        setup_processes()
