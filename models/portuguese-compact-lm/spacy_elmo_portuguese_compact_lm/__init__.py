"""portuguese-compact's softmax and vocabulary (`softmax.hdf5`, `vocab.txt`), for spacy-elmo: what
`pretrain --init-from portuguese-compact` and `perplexity portuguese-compact` read.

spacy-elmo finds these files by the model's name; nothing here is meant to be imported."""
