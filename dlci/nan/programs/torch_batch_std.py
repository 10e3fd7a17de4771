"""A classifier step whose logits are standardised over the batch by hand: the standard deviation is the square
root of the mean squared deviation, with eps added to the divisor only (the readout weights are drawn inside the
step, as in a random-feature probe)."""
import torch
import torch.nn.functional as F
from torch import nn


def train():
    features = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
    x = torch.randn(32, 8)
    y = torch.randint(0, 3, (32,))
    readout = torch.randn(16, 3) / 4
    h = features(x) @ readout
    std = torch.sqrt(((h - h.mean(0)) ** 2).mean(0))  # vulnerable
    logits = (h - h.mean(0)) / (std + 1e-5)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return loss.item()
