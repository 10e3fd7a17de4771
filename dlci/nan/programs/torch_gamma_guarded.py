"""The enhancement CNN of torch_gamma with the output clamped to a small positive floor before gamma encoding."""
import torch
import torch.nn.functional as F
from torch import nn


class Enhancer(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, 3, 3, padding=1))

    def forward(self, linear_rgb):
        return linear_rgb + 0.05 * self.body(linear_rgb)


def train():
    model = Enhancer()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        linear_rgb = torch.rand(4, 3, 16, 16) * 0.8 + 0.1
        target = torch.rand(4, 3, 16, 16)
        srgb = torch.pow(model(linear_rgb).clamp(min=1e-6), 1 / 2.2)
        loss = F.l1_loss(srgb, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()
