"""The GAN step of torch_gan with the generator loss written as log(1 - sigmoid(d)) = -softplus(d)."""
import torch
import torch.nn.functional as F
from torch import nn


def mlp(n_in, n_out, hidden=32):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, n_out))


def train():
    gen, disc = mlp(8, 2), mlp(2, 1)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.randn(64, 2) * 0.5 + torch.tensor([2.0, -1.0])
    z = torch.randn(64, 8)

    fake = gen(z)
    d_real, d_fake = disc(real), disc(fake.detach())
    loss_d = (F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
              + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake)))
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()

    loss_g = -F.softplus(disc(fake)).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    return loss_d.item() + loss_g.item()
