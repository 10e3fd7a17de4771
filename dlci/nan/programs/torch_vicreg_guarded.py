"""The VICReg-style step of torch_vicreg with a two-pass variance and eps under the square root."""
import torch
import torch.nn.functional as F
from torch import nn


def variance_term(z):
    std = torch.sqrt(z.var(dim=0) + 1e-4)
    return F.relu(1 - std).mean()


def covariance_term(z):
    z = z - z.mean(dim=0)
    cov = (z.T @ z) / (z.shape[0] - 1)
    off = cov - torch.diag(torch.diag(cov))
    return off.pow(2).sum() / z.shape[1]


def train():
    encoder = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 8))
    opt = torch.optim.SGD(encoder.parameters(), lr=0.05)
    x = torch.randn(16, 10)
    view_a = x + 0.1 * torch.randn_like(x)
    view_b = x + 0.1 * torch.randn_like(x)
    za, zb = encoder(view_a), encoder(view_b)
    loss = (25 * F.mse_loss(za, zb) + 25 * (variance_term(za) + variance_term(zb))
            + covariance_term(za) + covariance_term(zb))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
