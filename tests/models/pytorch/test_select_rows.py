"""select_rows: the rows of table[index], with the same gradient on every run."""
import torch

from spacy_elmo.models.pytorch.select_rows import select_rows


def test_select_rows_equals_indexing():
    table = torch.randn(7, 3)
    index = torch.tensor([[0, 6, 6], [2, 0, 1]])
    assert torch.equal(select_rows(table, index), table[index])
    assert torch.equal(select_rows(table[:, 0], index), table[:, 0][index])


def test_repeated_rows_get_the_same_gradient_every_run():
    torch.manual_seed(0)
    table = torch.randn(3000, 256, requires_grad=True)
    index = torch.randint(0, 3000, (60000,))
    upstream = torch.randn(60000, 256)
    gradients = []
    for _ in range(5):
        table.grad = None
        (select_rows(table, index) * upstream).sum().backward()
        gradients.append(table.grad.clone())
    assert all(torch.equal(gradients[0], g) for g in gradients[1:])
