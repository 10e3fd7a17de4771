"""The ArcFace head of torch_arcface with the cosine clamped inside (-1, 1) before acos."""
import torch
import torch.nn.functional as F
from torch import nn


class ArcFace(nn.Module):
    def __init__(self, dim=2, classes=10, scale=16.0, margin=0.2):
        super().__init__()
        self.centers = nn.Parameter(torch.randn(classes, dim))
        self.scale, self.margin = scale, margin

    def forward(self, emb, labels):
        cos = F.linear(F.normalize(emb), F.normalize(self.centers))
        theta = torch.acos(cos.clamp(-1 + 1e-6, 1 - 1e-6))
        target = F.one_hot(labels, cos.shape[1]).bool()
        logits = torch.cos(torch.where(target, theta + self.margin, theta)) * self.scale
        return F.cross_entropy(logits, labels)


def train():
    backbone = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    head = ArcFace()
    opt = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.05, momentum=0.9)
    x = torch.randn(32, 12)
    y = torch.randint(0, 10, (32,))
    loss = head(backbone(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
