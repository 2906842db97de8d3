"""The recurrent language model of ``word_language_model.py``, in its own module as users keep it
(a model saved whole with ``torch.save`` is loaded back by the class's module name)."""

import torch
from torch import nn


class RNNModel(nn.Module):
    """An embedding, an LSTM and a decoder to the vocabulary."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int) -> None:
        super().__init__()
        self.ntoken = ntoken
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid = nhid
        self.nlayers = nlayers

    def forward(self, input, hidden):
        emb = self.encoder(input)
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return torch.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz: int):
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.nlayers, bsz, self.nhid),
            weight.new_zeros(self.nlayers, bsz, self.nhid),
        )
