"""The direction regressor of torch_direction with the cosine clamped inside (-1, 1) before acos."""
import torch
import torch.nn.functional as F
from torch import nn


def train():
    net = nn.Sequential(nn.Linear(6, 24), nn.Tanh(), nn.Linear(24, 3))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(20, 6)
    direction = torch.randn(20, 3)
    for _ in range(2):
        cos = F.cosine_similarity(net(x), direction, dim=1)
        loss = torch.acos(cos.clamp(-1 + 1e-6, 1 - 1e-6)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()
