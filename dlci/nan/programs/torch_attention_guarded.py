"""The self-attention classifier of torch_attention with the library softmax (it subtracts the row maximum)."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        weights = torch.softmax(scores, dim=-1)
        return self.out(weights @ v)


def train():
    attn, head = SelfAttention(), nn.Linear(16, 3)
    opt = torch.optim.AdamW(list(attn.parameters()) + list(head.parameters()), lr=1e-3)
    tokens = torch.randn(8, 10, 16)
    labels = torch.randint(0, 3, (8,))
    for _ in range(2):
        logits = head(attn(tokens).mean(dim=1))
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()
