"""A retrieval encoder whose ReLU embeddings are L2-normalised by hand before a contrastive (InfoNCE) loss."""
import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self, n_in=24, dim=12):
        super().__init__()
        self.fc1 = nn.Linear(n_in, 32)
        self.fc2 = nn.Linear(32, dim)

    def forward(self, x):
        h = F.relu(self.fc2(F.relu(self.fc1(x))))
        return h / h.norm(dim=1, keepdim=True)  # vulnerable


def train():
    encoder = Encoder()
    opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    queries = torch.randn(16, 24)
    keys = queries + 0.2 * torch.randn(16, 24)
    sim = encoder(queries) @ encoder(keys).T / 0.1
    loss = F.cross_entropy(sim, torch.arange(16))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
