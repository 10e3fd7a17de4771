"""A regression MLP whose hidden ReLU activations go through a hand-written layer normalisation (divides by the
per-sample standard deviation)."""
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.gain = nn.Parameter(torch.ones(n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def norm(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        std = x.std(dim=-1, keepdim=True)
        return self.gain * (x - mean) / std + self.bias  # vulnerable

    def forward(self, x):
        return self.norm(F.relu(self.fc(x)))


def train():
    model = nn.Sequential(Block(6, 16), Block(16, 16), nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(24, 6)
    y = torch.randn(24, 1)
    for _ in range(2):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()
