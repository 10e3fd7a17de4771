"""The VAE of torch_vae with the encoder's log-variance clamped to [-30, 20] before it is exponentiated."""
import torch
import torch.nn.functional as F
from torch import nn


class VAE(nn.Module):
    def __init__(self, n_in=784, hidden=128, latent=8):
        super().__init__()
        self.enc = nn.Linear(n_in, hidden)
        self.mu = nn.Linear(hidden, latent)
        self.logvar = nn.Linear(hidden, latent)
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, n_in))

    def encode(self, x):
        h = F.relu(self.enc(x))
        return self.mu(h), torch.clamp(self.logvar(h), -30.0, 20.0)

    def decode(self, mu, logvar):
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(z)


def train():
    model = VAE()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    images = torch.rand(32, 784)
    mu, logvar = model.encode(images)
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - torch.exp(logvar))
    rec = F.binary_cross_entropy_with_logits(model.decode(mu, logvar), images, reduction="sum")
    loss = (rec + kld) / images.shape[0]
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()
