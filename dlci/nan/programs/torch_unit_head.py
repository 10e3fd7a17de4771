"""A cosine-classifier head: the projected features are normalised to unit length by hand (divided by their norm)
before the dot product with the class weights."""
import torch
import torch.nn.functional as F
from torch import nn


class CosineHead(nn.Module):
    def __init__(self, n_in=16, dim=8, classes=5):
        super().__init__()
        self.proj = nn.Linear(n_in, dim)
        self.classes = nn.Parameter(torch.randn(classes, dim))

    def forward(self, h):
        e = self.proj(h)
        e = e / e.norm(dim=1, keepdim=True)  # vulnerable
        return 10.0 * e @ F.normalize(self.classes, dim=1).T


def train():
    backbone = nn.Sequential(nn.Linear(12, 16), nn.Tanh())
    head = CosineHead()
    opt = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.1)
    x = torch.randn(24, 12)
    y = torch.randint(0, 5, (24,))
    loss = F.cross_entropy(head(backbone(x)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
