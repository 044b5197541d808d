"""portuguese-compact, spacy-elmo's Portuguese biLM (`options.json`, `weights.hdf5`): the default biLM of
Portuguese pipelines. Its softmax and vocabulary are in spacy-elmo-portuguese-compact-lm.

spacy-elmo finds these files by the model's name; nothing here is meant to be imported."""
