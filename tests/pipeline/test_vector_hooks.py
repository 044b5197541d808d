"""token/span/Doc vectors stay ELMo's when a later component overwrites Doc.tensor."""
import numpy
import spacy
from spacy.language import Language

from .util import weights_init_config


@Language.component("spacy_elmo_test_overwrite_tensor")
def _overwrite_tensor(doc):
    doc.tensor = numpy.ones((len(doc), 7), dtype="float32")  # as a tok2vec after elmo would
    return doc


def test_vectors_read_the_elmo_mix_not_a_later_tensor(weights):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"doc_tensor": "top"})
    nlp.add_pipe("spacy_elmo_test_overwrite_tensor")
    nlp.config["initialize"]["components"]["elmo"] = weights_init_config(weights)
    nlp.initialize()
    river, money = nlp("I sat on the bank of the river ."), nlp("I went to the bank to get money .")
    assert river.tensor.shape == (len(river), 7)
    numpy.testing.assert_array_equal(river[4].vector, river._.elmo.layers[-1][4])
    numpy.testing.assert_allclose(river[1:3].vector, river._.elmo.layers[-1][1:3].mean(axis=0), rtol=1e-6)
    assert river[4].similarity(money[4]) < 1.0 - 1e-4


def test_vectors_fall_back_to_the_tensor_without_doc_data(weights):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = weights_init_config(weights)
    nlp.initialize()
    doc = nlp("The bank of the river .")
    doc._.elmo = None  # what doc_cleaner does
    numpy.testing.assert_array_equal(doc[1].vector, doc.tensor[1])
