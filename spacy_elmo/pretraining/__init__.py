"""biLM pretraining: corpus streaming, vocabulary, LM objective, training loop."""
