"""The learning-rate schedule of a pretraining run: warm-up, constant, anneal.

A function of the step alone, so a resumed run continues the same schedule.
"""
from .config import OptimizerConfig


def learn_rate_at(config: OptimizerConfig, step: int, max_steps: int) -> float:
    """The learning rate of the step after `step` steps have run.

    Linear warm-up from ``learn_rate / warmup_steps`` to ``learn_rate`` over the first
    ``warmup_steps`` steps, then ``learn_rate``, then over the last ``anneal_steps``
    steps of ``max_steps`` linear down to ``anneal_to * learn_rate``.
    """
    rate = config.learn_rate
    if step < config.warmup_steps:
        return rate * (step + 1) / config.warmup_steps
    anneal_start = max_steps - config.anneal_steps
    if config.anneal_steps > 0 and step >= anneal_start:
        done = (step - anneal_start + 1) / config.anneal_steps
        return rate * (1.0 - done * (1.0 - config.anneal_to))
    return rate
