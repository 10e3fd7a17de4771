"""The classifier step of torch_batch_std with eps under the square root, where the derivative needs it."""
import torch
import torch.nn.functional as F
from torch import nn


def train():
    features = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
    x = torch.randn(32, 8)
    y = torch.randint(0, 3, (32,))
    readout = torch.randn(16, 3) / 4
    h = features(x) @ readout
    std = torch.sqrt(((h - h.mean(0)) ** 2).mean(0) + 1e-5)
    logits = (h - h.mean(0)) / std
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return loss.item()
