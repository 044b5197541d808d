"""english-compact's softmax and vocabulary (`softmax.hdf5`, `vocab.txt`), for spacy-elmo: what
`pretrain --init-from english-compact` and `perplexity english-compact` read; the biLM itself is in spacy-elmo.

spacy-elmo finds these files by the model's name; nothing here is meant to be imported."""
