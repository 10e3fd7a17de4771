"""An MLP classifier trained for a few steps with a hand-written cross-entropy."""
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self, features=20, hidden=32, classes=5):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


def cross_entropy(logits, target):
    probs = torch.softmax(logits, dim=1)
    picked = probs.gather(1, target.unsqueeze(1)).squeeze(1)
    return -torch.log(picked).mean()  # vulnerable


def train():
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 20)
    y = torch.randint(0, 5, (32,))
    for _ in range(3):
        opt.zero_grad()
        loss = cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return loss.item()
